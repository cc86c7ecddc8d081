import { type Config, configOf } from '../config.ts'
import { shardEnvs } from '../d1/shards.ts'
import { notificationDeadLetter } from '../dead-letters/notification.ts'
import { endIdlePause, releaseOrphanedPaused, releaseProbe, takeProbe } from '../dispatch/pause.ts'
import { KEYED_TRANSPORTS } from '../dispatch/transports/index.ts'
import type { Logger } from '../log.ts'
import { releaseWaiting } from '../materialize/release-waiting.ts'
import { bucketStatements } from '../metrics/buckets.ts'
import { GAUGES, setGauge } from '../metrics/counters.ts'
import { markExpired, selectExpired } from '../notifications/contact-wait.ts'
import { markUndecided, resolveUnknownOutcomes, selectUndecided, type UndecidedRow } from '../notifications/marks.ts'
import { markEnqueued, selectStuckNotifications } from '../notifications/stuck.ts'
import { dispatchFor } from '../queue/dispatch-message.ts'
import { sendAll } from '../queue/send.ts'
import { runRetention } from './retention.ts'

/** Stuck notifications re-enqueued per run; the next run takes the rest. */
const STUCK_BATCH = 1000

/**
 * The cron trigger's work. The notification row is the outbox of the dispatch
 * queue: whatever dispatch message was lost (a crash between commit and send,
 * local queue contents dropped on restart, a sender that died holding a lease)
 * is sent again here, and dispatch's claim makes that safe. A paused
 * transport gets its next probe; notifications whose contact exists by now
 * are released, and those that waited longer than CONTACT_WAIT_HOURS become
 * dead letters. The charted counters' gains of the minute go into their
 * time buckets (src/metrics/buckets.ts). Then retention: a bounded chunk of
 * each kind of data past its retention (./retention.ts). Each step runs even
 * when one before it failed; a failure is thrown so the run shows as failed,
 * and the next one tries again. Last, the time of the run is recorded (the gauge
 * `notify_maintenance_last_run_timestamp_seconds`).
 */
export async function runMaintenance(env: Env, now: Date, log: Logger): Promise<void> {
  const { DB_SHARDS: count, DB_SHARDS_GROWING_TO: growingTo } = configOf(env)
  // While the shards grow, rows move between databases and nothing else may write them (src/shards/grow.ts).
  // Nor is the run recorded: the doctor and /metrics see the cron as stopped, as it is.
  if (growingTo > 0) {
    log.warn('maintenance.held', { growingTo })
    return
  }
  // With D1 shards, every step but the last runs in each shard on its own: each holds its recipients'
  // notifications, their pause and their retention (src/d1/shards.ts).
  const steps: [string, number, () => Promise<unknown>][] = [
    ...shardEnvs(env, count).flatMap((shard, index) =>
      shardSteps(shard, now, log).map(([step, run]): [string, number, () => Promise<unknown>] => [step, index, run]),
    ),
    // Last, one row: the doctor (GET /v1/health/config) and /metrics tell from it whether the cron runs.
    [
      'last-run',
      0,
      () => setGauge(env.DB, GAUGES.maintenanceLastRun, {}, now.getTime() / 1000, now.toISOString()).run(),
    ],
  ]
  // Each step on its own: one that fails (a bug, D1 for a moment) must not keep the others from running.
  let failed: unknown
  for (const [step, shard, run] of steps) {
    try {
      await run()
    } catch (error) {
      log.error('maintenance.step-failed', { step, ...(count > 1 ? { shard } : {}), error })
      failed ??= error
    }
  }
  if (failed !== undefined) throw failed
}

/**
 * Retention's chunks a minute, shared out over the D1 shards: the cron's one
 * invocation may make 1,000 queries (src/platform-limits.ts), and each shard
 * holds a share of the inflow. One shard keeps them all.
 */
function retentionShare(config: Config): Config {
  if (config.DB_SHARDS === 1) return config
  return { ...config, RETENTION_MAX_CHUNKS: Math.max(1, Math.floor(config.RETENTION_MAX_CHUNKS / config.DB_SHARDS)) }
}

/** The steps of one shard (of the one database without shards), in order. */
function shardSteps(env: Env, now: Date, log: Logger): [string, () => Promise<unknown>][] {
  return [
    ['probe', () => probePausedTransport(env, now, log)],
    ['release', () => releaseWaiting(env, configOf(env), null, now, log)],
    ['contact-wait', () => expireContactWaits(env, now, log)],
    ['unknown-outcomes', () => resolveUnknown(env, now, log)],
    ['stuck', () => reEnqueueStuck(env, now, log)],
    // The minute's gains of the charted counters, for the console's charts and rates.
    ['buckets', () => env.DB.batch(bucketStatements(env.DB, now))],
    ['retention', () => runRetention(env, retentionShare(configOf(env)), now, log)],
  ]
}

async function reEnqueueStuck(env: Env, now: Date, log: Logger): Promise<void> {
  const config = configOf(env)
  const nowIso = now.toISOString()
  const cutoff = new Date(now.getTime() - config.STUCK_GRACE_SECONDS * 1000).toISOString()
  const { results: stuck } = await selectStuckNotifications(env.DB, nowIso, cutoff, STUCK_BATCH).all<{
    id: string
    scheduled_at: string
  }>()
  if (stuck.length === 0) return
  await sendAll(
    env.DISPATCH,
    stuck.map((row) => dispatchFor(row.id, row.scheduled_at, now)),
  )
  await markEnqueued(
    env.DB,
    stuck.map((row) => row.id),
    nowIso,
  ).run()
  log.warn('maintenance.re-enqueued', { count: stuck.length })
}

/**
 * For each configured transport that is paused with its next probe due, one
 * of the notifications waiting for it is released and enqueued: the claim
 * lets only that one through, to that transport. Whatever waits `paused`
 * while a configured transport is usable (switched, the pause removed by
 * hand, another of EMAIL_TRANSPORTS back) is released for the stuck search.
 * A probe's slot is held for two leases, so a probe that never reports back
 * is replaced, never joined by a second one. (While mail flows through
 * another transport, nothing waits `paused`: the claim picks the probe,
 * src/dispatch/failover.ts.)
 */
async function probePausedTransport(env: Env, now: Date, log: Logger): Promise<void> {
  const config = configOf(env)
  const transports = JSON.stringify(config.transports)
  const nowIso = now.toISOString()
  const holdUntil = new Date(now.getTime() + 2 * config.DISPATCH_LEASE_SECONDS * 1000).toISOString()
  const results = await env.DB.batch<{ id: string; scheduled_at: string; probe_id: string | null }>([
    ...config.transports.flatMap((transport) => [
      takeProbe(env.DB, transport, nowIso, holdUntil, transports),
      releaseProbe(env.DB, transport, nowIso),
      endIdlePause(env.DB, transport, nowIso, transports),
    ]),
    releaseOrphanedPaused(env.DB, transports, nowIso),
  ])
  const released: { id: string; scheduled_at: string }[] = []
  config.transports.forEach((transport, index) => {
    const [taken, rows, idle] = results.slice(index * 3, index * 3 + 3)
    if ((idle?.results.length ?? 0) > 0) log.warn('transport.resumed', { transport, code: 'nothing-waits' })
    const probe = taken?.results[0]?.probe_id
    if (!probe || (rows?.results.length ?? 0) === 0) return
    released.push(...(rows?.results ?? []))
    log.warn('transport.probe', { transport, notificationId: probe, released: rows?.results.length })
  })
  if (released.length === 0) return
  // The probe, and the members of its batch when it is in one.
  await sendAll(
    env.DISPATCH,
    released.map((row) => dispatchFor(row.id, row.scheduled_at, now)),
  )
}

/**
 * Notifications that waited for their contact longer than CONTACT_WAIT_HOURS
 * end `undeliverable` with a dead letter (NTF_CONTACT_NOT_FOUND, replayable
 * once the contact exists) written in the same D1 batch, naming their event.
 */
async function expireContactWaits(env: Env, now: Date, log: Logger): Promise<void> {
  const nowIso = now.toISOString()
  const { results: expired } = await selectExpired(env.DB, nowIso, STUCK_BATCH).all<{
    id: string
    kind: string
    event_id: string
    source: string
    recipient_user_id: string
    scheduled_at: string
  }>()
  if (expired.length === 0) return
  const hours = configOf(env).CONTACT_WAIT_HOURS
  const letters = await Promise.all(
    expired.map((row) =>
      notificationDeadLetter(env.DB, row, {
        status: 'undeliverable',
        code: 'NTF_CONTACT_NOT_FOUND',
        error: `no contact for user ${row.recipient_user_id} in the replica within ${hours} h`,
        attempts: 1,
        at: nowIso,
      }),
    ),
  )
  await env.DB.batch([
    markExpired(
      env.DB,
      expired.map((row) => row.id),
      nowIso,
    ),
    ...letters,
  ])
  log.warn('maintenance.contact-wait-ended', { count: expired.length })
}

/**
 * Unknown outcomes (src/notifications/marks.ts): settled as sent by a delivery
 * event; with none in time, sent again through a transport without an
 * idempotency key, and through one with a key — where an unknown outcome is
 * a retry that would have come past the key's window, or a batch refused on
 * a retry after its first request may have gone out — ended `failed` with a
 * dead letter (in the same D1 batch) that says so, for an operator to
 * decide: a blind send could be a second email.
 */
async function resolveUnknown(env: Env, now: Date, log: Logger): Promise<void> {
  const nowIso = now.toISOString()
  const config = configOf(env)
  const transports = JSON.stringify(config.transports)
  const keyed = JSON.stringify(KEYED_TRANSPORTS)
  if (!(await resolveUnknownOutcomes(env.DB, nowIso, transports, keyed))) return
  const { results } = await selectUndecided(env.DB, nowIso, STUCK_BATCH).all<UndecidedRow>()
  if (results.length === 0) return
  const reason = 'it may have gone out (its answer was lost) and no delivery event came: not sent again blindly'
  const statements = await Promise.all(
    results.flatMap((row) => [
      markUndecided(env.DB, row.id, reason, nowIso),
      notificationDeadLetter(env.DB, row, {
        status: 'failed',
        code: 'NTF_SEND_UNKNOWN',
        error: `${reason} (${row.status_reason ?? 'outcome unknown'})`,
        attempts: Math.max(1, row.send_attempts),
        at: nowIso,
      }),
    ]),
  )
  await env.DB.batch(statements)
  log.error('maintenance.outcomes-undecided', { count: results.length, code: 'NTF_SEND_UNKNOWN' })
}
