// Deep imports on purpose: prom-client's index also loads its push gateway and the
// default process metrics, which need Node's http and process APIs that a Worker lacks.
import Counter from 'prom-client/lib/counter.js'
import Gauge from 'prom-client/lib/gauge.js'
import Registry from 'prom-client/lib/registry.js'
import { COUNTERS, GAUGES } from './counters.ts'

type Row = { name: string; labels: string; value: number }

const HELP: Record<string, { help: string; labels: string[]; type: 'counter' | 'gauge' }> = {
  [COUNTERS.authFailures]: {
    help: 'Unknown bearer tokens (ingest, operator API) and failed console sign-ins, by surface; outcome throttled counts each client once a period when it passed the limit and was answered 429. Alert when it grows.',
    labels: ['surface', 'outcome'],
    type: 'counter',
  },
  [COUNTERS.notifications]: {
    help: 'Notifications that entered each status, by kind and channel.',
    labels: ['kind', 'channel', 'status'],
    type: 'counter',
  },
  [COUNTERS.events]: { help: 'Inbound events by source and outcome.', labels: ['source', 'outcome'], type: 'counter' },
  [COUNTERS.deadLettersOpen]: {
    help: 'Dead letters open now, by queue and code; alert when > 0.',
    labels: ['queue', 'code'],
    type: 'gauge',
  },
  [COUNTERS.deadLettersUnstorable]: {
    help: 'Dead letters D1 would not store whole: stored without their body (reduced), or dropped when even that failed on the last delivery; alert when it grows.',
    labels: ['queue', 'code', 'outcome'],
    type: 'counter',
  },
  [COUNTERS.deadLetters]: {
    help: 'Messages that became dead letters, each failure once (a new dead letter, or one that died again), by queue and code.',
    labels: ['queue', 'code'],
    type: 'counter',
  },
  [COUNTERS.deliveries]: {
    help: "Provider delivery events recorded (each once), by transport, status and the notification's kind (since migration 0015; earlier counts have no kind).",
    labels: ['transport', 'status', 'kind'],
    type: 'counter',
  },
  [COUNTERS.digests]: {
    help: 'Digest emails that entered each status, by kind and channel (collecting when opened; the notifications they tell are digested in notify_notifications_total).',
    labels: ['kind', 'channel', 'status'],
    type: 'counter',
  },
  [GAUGES.transportPaused]: {
    help: 'Whether the transport is paused (1) — by a failure of our own configuration, or its circuit open (code circuit-open) — or usable (0); alert when 1.',
    labels: ['transport', 'code'],
    type: 'gauge',
  },
  [GAUGES.transportState]: {
    help: 'Each configured email transport, 1 for the state it is in and 0 for the others: active (the first usable of EMAIL_TRANSPORTS, carrying the mail), standby (usable, behind it), paused or circuit-open; alert when no transport is active.',
    labels: ['transport', 'state'],
    type: 'gauge',
  },
  [GAUGES.transportSentLastHour]: {
    help: 'Emails each transport sent in the last hour (by the time they were sent, every D1 shard): its share of the mail.',
    labels: ['transport'],
    type: 'gauge',
  },
  [GAUGES.d1Size]: {
    help: "Size of the D1 database in bytes, as D1 reported it after the cron's last statement; every write fails at D1's 10 GB.",
    labels: [],
    type: 'gauge',
  },
  [GAUGES.maintenanceLastRun]: {
    help: 'When the maintenance cron last ran, in Unix seconds; alert when time() minus it passes 300 (it runs every minute, and re-sends what is stuck).',
    labels: [],
    type: 'gauge',
  },
  [GAUGES.consumerLag]: {
    help: 'Age of the events in the latest notify-events batch (event time to processing), by source; of several queues, the largest.',
    labels: ['source'],
    type: 'gauge',
  },
}

/** The profile-events document's own names, kept so dashboards built on it keep working. */
const ALIASES = {
  enqueued: {
    name: 'notifications_enqueued_total',
    help: 'Notifications created pending, by kind and channel (the PIN profile-events spec).',
  },
  lag: {
    name: 'notifications_consumer_lag_seconds',
    help: 'Same as notify_consumer_lag_seconds (the PIN profile-events spec).',
  },
}

/**
 * The Prometheus exposition text of the counters and gauges kept in D1,
 * formatted by prom-client.
 */
export async function exposition(
  counters: readonly Row[],
  gauges: readonly Row[],
): Promise<{ text: string; contentType: string }> {
  const registry = new Registry()
  const metrics = new Map<string, Counter | Gauge>()
  const metric = (name: string, help: string, labelNames: string[], type: 'counter' | 'gauge') => {
    let found = metrics.get(name)
    if (!found) {
      found =
        type === 'counter'
          ? new Counter({ name, help, labelNames, registers: [registry] })
          : new Gauge({ name, help, labelNames, registers: [registry] })
      metrics.set(name, found)
    }
    return found
  }
  for (const [name, spec] of Object.entries(HELP)) metric(name, spec.help, spec.labels, spec.type)
  metric(ALIASES.enqueued.name, ALIASES.enqueued.help, ['kind', 'channel'], 'counter')
  metric(ALIASES.lag.name, ALIASES.lag.help, ['source'], 'gauge')

  // A gauge's rows that differ only in a label it does not declare (a shard's queue) give the largest.
  const gaugeValues = new Map<string, number>()
  for (const row of [...counters, ...gauges]) {
    const spec = HELP[row.name]
    if (!spec) continue
    const stored = JSON.parse(row.labels) as Record<string, string>
    // In the declared order, whatever order the row stored them in.
    const labels = Object.fromEntries(spec.labels.map((name) => [name, stored[name] ?? '']))
    if (spec.type === 'gauge') {
      const key = `${row.name}\n${JSON.stringify(labels)}`
      const larger = gaugeValues.get(key)
      if (larger !== undefined && larger >= row.value) continue
      gaugeValues.set(key, row.value)
    }
    const target = metric(row.name, spec.help, spec.labels, spec.type)
    if (target instanceof Counter) target.inc(labels, Math.max(0, row.value))
    else target.set(labels, row.value)
    if (row.name === COUNTERS.notifications && labels.status === 'pending') {
      ;(metrics.get(ALIASES.enqueued.name) as Counter).inc(
        { kind: labels.kind, channel: labels.channel },
        Math.max(0, row.value),
      )
    }
    if (row.name === GAUGES.consumerLag) (metrics.get(ALIASES.lag.name) as Gauge).set(labels, row.value)
  }
  return { text: await registry.metrics(), contentType: registry.contentType }
}
