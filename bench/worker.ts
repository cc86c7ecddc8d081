/** `npm run bench`: the Worker under `wrangler dev`, beside a bare Worker doing the same work with nothing of ours. */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { renderTable } from '../bin/table.ts'
import { startBridge } from '../support/bridge-process.ts'
import { startLocalWorker } from '../support/local-worker.ts'
import { freshDatabase } from '../support/postgres.ts'
import { freePort, waitFor } from '../support/wait.ts'
import { costLines, costPer, messagesRead } from './costs.ts'
import { budget, cpuMsOfGroup, goals, N, PROFILE, percentile, progress, rate, ratio, results } from './lib.ts'
import { BENCH_TOKENS, benchEvent, ingestRate, pipelineAt } from './pipeline.ts'
import { type CpuProfile, isolateTime, sourceMapped, startProfile, summarise } from './profile.ts'

/** Budget of workerd CPU per 1,000 events through the whole pipeline, locally (D1 and Queues run in it too). */
const CPU_BUDGET_MS_PER_1000 = 6_000
/** Goal of workerd CPU per 1,000 events beside the bare Worker's per 1,000 messages sent. */
const CPU_GOAL_TIMES_BARE = 2
/** Where `--profile` writes the Worker isolate's profile (git-ignored; open it in Chrome DevTools). */
const PROFILE_FILE = 'bench/worker-pipeline.cpuprofile'
/** Budget of the Worker bundle, gzip: a tenth of the paid plan's 10 MB limit, a third of the free plan's 3 MB. */
const BUNDLE_BUDGET_BYTES = 1_000_000

/** Isolate CPU of a profiled phase, per 1,000 messages: all it ran, and the `(program)` part of it (bench/profile.ts). */
type IsolateCpu = { runMsPer1000: number; programMsPer1000: number; samples: number }

/** Runs `phase` (of `n` messages) under the isolate's profiler; the profile and its isolate CPU. */
async function profiled(
  inspectorPort: number,
  tickUrl: string,
  n: number,
  phase: () => Promise<unknown>,
): Promise<{ profile: CpuProfile; cpu: IsolateCpu }> {
  const recording = await startProfile(inspectorPort, tickUrl)
  await phase()
  const profile = await recording.stop()
  const time = isolateTime(profile)
  const per1000 = (ms: number) => Math.round((ms / n) * 1000)
  return {
    profile,
    cpu: { runMsPer1000: per1000(time.runMs), programMsPer1000: per1000(time.programMs), samples: time.samples },
  }
}

/**
 * The bare Worker (bench/bare-worker): queue → one D1 batch → ack, and queue →
 * `send_email` for each message at once → one D1 batch → ack, with the consumer
 * settings of notify-events and notify-dispatch. Its send rate is the ceiling
 * of any local ingest → email pipeline. The send is run twice: measured, then
 * under the isolate's profiler for its isolate CPU.
 */
async function bareCeilings(): Promise<{
  queue: number
  send: number
  sendCpuPer1000: number
  sendIsolate: IsolateCpu
}> {
  const inspectorPort = await freePort()
  const local = await startLocalWorker({}, { config: 'bench/bare-worker/wrangler.toml', inspectorPort })
  try {
    const doneOf = async (queue: string) =>
      ((await (await fetch(`${local.url}/done?queue=${queue}`)).json()) as { done: number }).done
    const run = async (queue: string, n: number) => {
      const before = await doneOf(queue)
      const cpuBefore = cpuMsOfGroup(local.processGroup, 'workerd')
      const start = performance.now()
      const response = await fetch(`${local.url}/enqueue?queue=${queue}&n=${n}`, { method: 'POST' })
      if (!response.ok) throw new Error(`bare worker: ${response.status} ${await response.text()}`)
      await waitFor(async () => ((await doneOf(queue)) >= before + n ? true : undefined), `bare ${queue}`, 600_000)
      return {
        rate: rate(n, performance.now() - start),
        cpuPer1000: Math.round(((cpuMsOfGroup(local.processGroup, 'workerd') - cpuBefore) / n) * 1000),
      }
    }
    progress(
      `worker_pipeline: bare Worker ceilings — queue → D1 batch (${N.bareQueue}), queue → send_email → D1 batch (${N.bareSend}), then the send again profiled`,
    )
    const queue = await run('bare-d1', N.bareQueue)
    const send = await run('bare-send', N.bareSend)
    const { cpu } = await profiled(inspectorPort, `${local.url}/healthz`, N.bareSend, () =>
      run('bare-send', N.bareSend),
    )
    return { queue: queue.rate, send: send.rate, sendCpuPer1000: send.cpuPer1000, sendIsolate: cpu }
  } finally {
    await local.stop()
  }
}

/** The gzip size of what `wrangler deploy` would upload (`--dry-run --outdir`). */
export function bundleGzipBytes(): number {
  const outdir = mkdtempSync(join(tmpdir(), 'notify-edge-bundle-'))
  try {
    execFileSync('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', outdir], {
      stdio: 'ignore',
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
    })
    const files = readdirSync(outdir).filter((name) => name.endsWith('.js') || name.endsWith('.wasm'))
    const bytes = files.reduce((sum, name) => sum + gzipSync(readFileSync(join(outdir, name))).length, 0)
    budget('Worker bundle (gzip)', bytes, BUNDLE_BUDGET_BYTES, 'bytes')
    return bytes
  } finally {
    rmSync(outdir, { recursive: true, force: true })
  }
}

/**
 * The Worker pipeline under `wrangler dev` beside the bare Worker's ceilings,
 * its CPU per 1,000 events, its D1 round trips per batch, ingest → email and
 * PostgreSQL commit → email latency.
 */
export async function benchWorker() {
  const bare = await bareCeilings()
  const { ingest, admin: adminToken } = BENCH_TOKENS
  const inspectorPort = await freePort()
  const local = await startLocalWorker(
    // As deployed: the harness keeps the exact message sent for the tests that read it, a deployment does not.
    { INGEST_TOKEN: ingest, ADMIN_TOKEN: adminToken, LOG_LEVEL: 'info', SENT_MESSAGE_RETENTION_DAYS: '0' },
    { inspectorPort },
  )
  const worker = local.url
  const db = await freshDatabase()
  const driven = pipelineAt(worker, BENCH_TOKENS)
  const { post, sentCount } = driven
  try {
    progress('worker_pipeline: D1 round trips per consumer batch, and the cost per email, at batch sizes 1, 10 and 100')
    const roundTrips: Record<string, number[]> = {}
    const perEmail: Record<string, Record<string, number>> = {}
    for (const size of [1, 10, 100]) {
      const before = local.output().length
      const baseline = await sentCount()
      await post(Array.from({ length: size }, () => benchEvent().inbound))
      await waitFor(
        async () => ((await sentCount()) >= baseline + size ? true : undefined),
        `batch of ${size}`,
        120_000,
      )
      // A consumer logs its cost once it has settled its batch, after the emails are counted as sent.
      const costs = await waitFor(() => {
        const lines = costLines(local.output().slice(before))
        const done = messagesRead(lines, 'notify-events') >= size && messagesRead(lines, 'notify-dispatch') >= size
        return done ? lines : undefined
      }, `the cost lines of a batch of ${size}`)
      perEmail[String(size)] = costPer(costs, size)
      const lines = [
        ...local
          .output()
          .slice(before)
          .matchAll(/"event":"materialize\.batch"[^\n]*"messages":(\d+),"d1RoundTrips":(\d+)/g),
      ]
      const batches = lines.map((match) => ({ messages: Number(match[1]), trips: Number(match[2]) }))
      if (batches.length === 0) throw new Error(`no materialize.batch line in the Worker's log for a batch of ${size}`)
      roundTrips[String(size)] = batches.map((batch) => batch.trips)
      progress(
        `  ${size}: consumer batches ${batches.map((b) => `${b.messages} msgs → ${b.trips} round trips`).join(', ')}`,
      )
    }

    progress(`worker_pipeline: ${N.worker} events, ingest → email`)
    const sentAt = new Map<string, number>()
    const cpuBefore = cpuMsOfGroup(local.processGroup, 'workerd')
    const pipelineRate = await ingestRate(
      driven,
      Array.from({ length: N.worker }, () => benchEvent()),
      (events) => {
        const at = Date.now()
        for (const item of events) sentAt.set(item.eventId, at)
      },
    )
    const cpuPer1000 = Math.round(((cpuMsOfGroup(local.processGroup, 'workerd') - cpuBefore) / N.worker) * 1000)
    // The isolate's own CPU, what a deployment is billed: the same number of events again, under the
    // profiler (which slows the isolate, so the rate and workerd's CPU above are measured without it).
    progress(`worker_pipeline: ${N.worker} events more, under the isolate's profiler`)
    const isolate = await profiled(inspectorPort, `${worker}/healthz`, N.worker, () =>
      ingestRate(
        driven,
        Array.from({ length: N.worker }, () => benchEvent()),
      ),
    )
    const profile = PROFILE ? recordProfile(isolate.profile) : undefined
    const latencies: number[] = []
    for (const [eventId, at] of [...sentAt].slice(0, 200)) {
      const story = (await (
        await fetch(`${worker}/v1/events/${eventId}`, { headers: { authorization: `Bearer ${adminToken}` } })
      ).json()) as { notifications: { sentAt: string }[] }
      const sent = story.notifications[0]?.sentAt
      if (sent) latencies.push(Date.parse(sent) - at)
    }
    const tripsBySize = Object.fromEntries(
      Object.entries(roundTrips).map(([size, trips]) => [size, Math.max(...trips)]),
    )
    const flat = new Set(Object.values(tripsBySize)).size === 1
    goals.push({
      name: 'D1 round trips per batch at 1 / 10 / 100',
      value: Object.values(tripsBySize).join(' / '),
      goal: 'flat',
      met: flat,
    })
    results.worker_pipeline = {
      msgs_per_s: pipelineRate,
      bare_send_ceiling_msgs_per_s: bare.send,
      bare_queue_ceiling_msgs_per_s: bare.queue,
      of_bare_send_ceiling: ratio('worker_pipeline / bare send ceiling', pipelineRate, bare.send, 75),
      cpu_ms_per_1000_events: cpuPer1000,
      bare_send_cpu_ms_per_1000_messages: bare.sendCpuPer1000,
      isolate_cpu_ms_per_1000_emails: isolate.cpu.runMsPer1000,
      isolate_program_ms_per_1000_emails: isolate.cpu.programMsPer1000,
      bare_send_isolate_cpu_ms_per_1000_messages: bare.sendIsolate.runMsPer1000,
      bare_send_isolate_program_ms_per_1000_messages: bare.sendIsolate.programMsPer1000,
      isolate_samples: { pipeline: isolate.cpu.samples, bare_send: bare.sendIsolate.samples },
      d1_round_trips_per_batch: tripsBySize,
      ...costsBySize(perEmail),
      p50_ms: percentile(latencies, 50),
      p99_ms: percentile(latencies, 99),
      events: N.worker,
      ...(profile ? { profiled: true, profile_top_self: profile } : {}),
    }
    budget('Worker CPU per 1,000 events (workerd, local)', cpuPer1000, CPU_BUDGET_MS_PER_1000, 'ms')
    const timesBare = Math.round((cpuPer1000 / bare.sendCpuPer1000) * 10) / 10
    results.worker_pipeline.cpu_times_bare_send = timesBare
    goals.push({
      name: 'workerd CPU per 1,000 events / bare Worker per 1,000 sends',
      value: `${timesBare}×`,
      goal: `≤ ${CPU_GOAL_TIMES_BARE}×`,
      met: timesBare <= CPU_GOAL_TIMES_BARE,
    })
    const isolateTimesBare =
      Math.round((isolate.cpu.runMsPer1000 / Math.max(1, bare.sendIsolate.runMsPer1000)) * 10) / 10
    results.worker_pipeline.isolate_cpu_times_bare_send = isolateTimesBare
    goals.push({
      name: 'isolate CPU per 1,000 emails / bare Worker per 1,000 sends',
      value: `${isolateTimesBare}× (${isolate.cpu.runMsPer1000} / ${bare.sendIsolate.runMsPer1000} ms)`,
      goal: `≤ ${CPU_GOAL_TIMES_BARE}×`,
      met: isolateTimesBare <= CPU_GOAL_TIMES_BARE,
    })

    progress(`end_to_end: ${N.e2e} outbox rows, PostgreSQL commit → email`)
    const relay = await startBridge({
      PG_URL: db.url,
      SINK_URL: `${worker}/v1/ingest`,
      SINK_TOKEN: ingest,
      LOG_LEVEL: 'warn',
    })
    const committed = new Map<string, number>()
    for (let index = 0; index < N.e2e; index += 1) {
      const { eventId, inbound } = benchEvent()
      await db.sql.begin(async (tx) => {
        await tx`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${eventId})`
        await tx`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body) VALUES (${eventId}, ${Buffer.from(inbound.body)})`
      })
      committed.set(eventId, Date.now())
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const endToEnd: number[] = []
    for (const [eventId, at] of committed) {
      const sent = await waitFor(
        async () => {
          const story = (await (
            await fetch(`${worker}/v1/events/${eventId}`, { headers: { authorization: `Bearer ${adminToken}` } })
          ).json()) as { notifications?: { sentAt: string | null }[] }
          return story.notifications?.[0]?.sentAt ?? undefined
        },
        'the email',
        120_000,
      )
      endToEnd.push(Date.parse(sent) - at)
    }
    await relay.stop()
    results.end_to_end = { p50_ms: percentile(endToEnd, 50), p99_ms: percentile(endToEnd, 99), events: N.e2e }
    budget('PostgreSQL commit → email p50', percentile(endToEnd, 50), 500, 'ms')
    budget('PostgreSQL commit → email p99', percentile(endToEnd, 99), 1500, 'ms')
  } finally {
    await local.stop()
    await db.drop()
  }
}

/**
 * `{d1_statements_per_email: {1: …, 10: …, 100: …}, …}`: each cost per email
 * as one key of bench/results.json, by the batch size it was measured at.
 */
function costsBySize(perEmail: Record<string, Record<string, number>>): Record<string, Record<string, number>> {
  const keyed: Record<string, Record<string, number>> = {}
  for (const [size, costs] of Object.entries(perEmail)) {
    for (const [name, value] of Object.entries(costs)) {
      keyed[`${name}_per_email`] ??= {}
      ;(keyed[`${name}_per_email`] as Record<string, number>)[size] = value
    }
  }
  return keyed
}

/**
 * Writes the profiled phase's profile to PROFILE_FILE and prints its top functions
 * by self and by inclusive time; returns the top ten by self for results.json.
 */
function recordProfile(profile: CpuProfile): string[] {
  writeFileSync(PROFILE_FILE, JSON.stringify(profile))
  const { bySelf, byInclusive } = summarise(profile, sourceMapped())
  const table = (entries: typeof bySelf) =>
    renderTable(
      ['SELF %', 'INCLUSIVE %', 'FUNCTION'],
      entries.map((entry) => [entry.selfPercent, entry.inclusivePercent, entry.fn]),
    )
  progress(`worker_pipeline: CPU profile of the Worker isolate written to ${PROFILE_FILE}`)
  progress('  (the profiled phase only: the rate and workerd CPU above were measured without the profiler)')
  console.log(
    `\nTop functions by self time:\n${table(bySelf)}\n\nTop functions by inclusive time:\n${table(byInclusive)}\n`,
  )
  return bySelf.slice(0, 10).map((entry) => `${entry.selfPercent}% ${entry.fn}`)
}
