/**
 * `npm run bench`: what an event told in a digest costs beside one sent at
 * once. `response.created` events in bursts of DIGEST_BURST to one owner each
 * (`ResponseCreated` is digested by default: a burst is one digest, one
 * email), beside as many `invitation.created` events, each its own email at
 * once; both through the same Worker, posted the same way — all in one ingest
 * request (consumer batches of up to 100), and one at a time (each event done
 * with before the next is posted). Summed from the Worker's `invocation.cost`
 * lines, as the cost per email of bench/worker.ts; reported per event, and per
 * digest email, under `results.digest_cost`.
 */
import { INGEST_MAX_EVENTS } from '@notify-edge/contracts'
import { renderTable } from '../bin/table.ts'
import { type LocalWorker, startLocalWorker } from '../support/local-worker.ts'
import { waitFor } from '../support/wait.ts'
import { costLines, costPer, messagesRead } from './costs.ts'
import { progress, results, SCALE } from './lib.ts'
import {
  BENCH_TOKEN_VARIABLES,
  BENCH_TOKENS,
  type BenchEvent,
  benchEvent,
  type Pipeline,
  pipelineAt,
  responseEvent,
} from './pipeline.ts'

/** Events to one owner in a burst: each burst is one digest. */
const DIGEST_BURST = 10
/** Events of the run posted in one request: ten bursts at BENCH_SCALE=1, never fewer than two. */
const EVENTS = Math.min(INGEST_MAX_EVENTS, Math.max(2, Math.round(10 * SCALE)) * DIGEST_BURST)
/**
 * DIGEST_WINDOW_SECONDS of the Worker (the kind's own is 10 minutes): a
 * digest closes on a whole second this long after it opened, so a burst must
 * be materialized within it — one request of them takes well under a second,
 * DIGEST_BURST posted one at a time a few seconds on a loaded machine — and
 * the run waits about this long for each close.
 */
const WINDOW_SECONDS = 10

/** What one posting of events cost, summed over its cost lines. */
type Measured = {
  lines: ReturnType<typeof costLines>
  emails: number
  digests: number
  /** Seconds from the first post until every event was materialized: a burst must fit in the window. */
  materializedIn: number
}

/**
 * `results.digest_cost`: per event, instant and digested, at 100 events a
 * request and at one at a time; per digest email; events per digest email.
 */
export async function benchDigest(): Promise<void> {
  const local = await startLocalWorker({
    ...BENCH_TOKEN_VARIABLES,
    LOG_LEVEL: 'info',
    DIGEST_WINDOW_SECONDS: String(WINDOW_SECONDS),
    // As deployed: no exact message kept.
    SENT_MESSAGE_RETENTION_DAYS: '0',
  })
  const worker = pipelineAt(local.url, BENCH_TOKENS)
  try {
    const runs: Record<string, { instant: Measured; digested: Measured; events: number }> = {}
    for (const [size, events] of [
      [String(EVENTS), EVENTS],
      ['1', DIGEST_BURST],
    ] as const) {
      const together = size !== '1'
      progress(
        `digest_cost: ${events} invitation.created events, each its own email at once, ${together ? 'in one request' : 'one at a time'}`,
      )
      const instant = await measure(local, worker, Array.from({ length: events }, benchEvent), together, false)
      progress(
        `digest_cost: ${events} response.created events, ${DIGEST_BURST} to each owner (one digest each, closed after ${WINDOW_SECONDS} s), ${together ? 'in one request' : 'one at a time'}`,
      )
      const digested = await measure(local, worker, bursts(events), together, true)
      progress(
        `  instant: ${instant.emails} emails; digested: ${digested.emails} emails from ${digested.digests} digests (all materialized ${digested.materializedIn} s after the first post; window ${WINDOW_SECONDS} s)`,
      )
      if (digested.digests !== events / DIGEST_BURST) {
        progress(`  (expected ${events / DIGEST_BURST} digests: a burst took longer than the window to materialize)`)
      }
      runs[size] = { instant, digested, events }
    }
    printByHandler(runs)
    const by = (value: (run: (typeof runs)[string]) => unknown) =>
      Object.fromEntries(Object.entries(runs).map(([size, run]) => [size, value(run)]))
    results.digest_cost = {
      events: by((run) => run.events),
      events_per_burst: DIGEST_BURST,
      digest_window_seconds: WINDOW_SECONDS,
      instant_per_event: by((run) => costPer(run.instant.lines, run.events)),
      digested_per_event: by((run) => costPer(run.digested.lines, run.events)),
      digested_per_digest_email: by((run) => costPer(run.digested.lines, run.digested.emails)),
      events_per_digest_email: by((run) => Math.round((run.events / run.digested.emails) * 100) / 100),
      instant_emails: by((run) => run.instant.emails),
      digested_emails: by((run) => run.digested.emails),
    }
  } finally {
    await local.stop()
  }
}

/** `events` response.created events, DIGEST_BURST in a row to each of `events / DIGEST_BURST` fresh owners. */
function bursts(events: number): BenchEvent[] {
  const owners = Array.from({ length: Math.ceil(events / DIGEST_BURST) }, () => crypto.randomUUID())
  return Array.from({ length: events }, (_, index) => responseEvent(owners[Math.floor(index / DIGEST_BURST)] as string))
}

/**
 * Posts `events` — in one request, or one at a time, each materialized (and,
 * sent at once, sent) before the next — then waits until every email they
 * make is sent (every digest they opened sent, or superseded by its only
 * member's own email) and every consumer batch has logged its cost.
 */
async function measure(
  local: LocalWorker,
  worker: Pipeline,
  events: readonly BenchEvent[],
  together: boolean,
  digested: boolean,
): Promise<Measured> {
  const before = local.output().length
  const lines = () => costLines(local.output().slice(before))
  const sentBefore = await worker.sentCount()
  const digests = async () => ({
    opened: await worker.counted('notify_digests_total', 'collecting'),
    ended:
      (await worker.counted('notify_digests_total', 'sent')) +
      (await worker.counted('notify_digests_total', 'superseded')),
  })
  const digestsBefore = await digests()
  const start = performance.now()
  if (together) {
    await worker.post(events.map((event) => event.inbound))
  } else {
    for (const [index, event] of events.entries()) {
      await worker.post([event.inbound])
      await waitFor(
        async () => {
          const done = digested
            ? messagesRead(lines(), 'notify-events') > index
            : (await worker.sentCount()) > sentBefore + index && messagesRead(lines(), 'notify-dispatch') > index
          return done ? true : undefined
        },
        `event ${index + 1} of ${events.length}`,
        120_000,
      )
    }
  }
  await waitFor(() => (messagesRead(lines(), 'notify-events') >= events.length ? true : undefined), 'every event')
  const materializedIn = Math.round((performance.now() - start) / 100) / 10
  let opened = 0
  if (digested) {
    // Every digest the events opened is closed and sent (or gave way to its only member's own email).
    opened = await waitFor(
      async () => {
        const now = await digests()
        const count = now.opened - digestsBefore.opened
        return count > 0 && now.ended - digestsBefore.ended >= count ? count : undefined
      },
      'every digest sent',
      120_000 + WINDOW_SECONDS * 1000,
    )
  }
  // An instant email is read once from notify-dispatch; a digest twice: its close, then its send.
  const dispatchReads = digested ? 2 * opened : events.length
  await waitFor(
    async () => {
      const read = messagesRead(lines(), 'notify-dispatch') >= dispatchReads
      return read && (await worker.sentCount()) >= sentBefore + (digested ? opened : events.length) ? true : undefined
    },
    'every email and its cost lines',
    120_000,
  )
  // A batch still in flight (a message delivered early and put back) logs its line shortly after.
  let count = lines().length
  await waitFor(async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const settled = lines().length === count
    count = lines().length
    return settled ? true : undefined
  }, 'the last cost line')
  return { lines: lines(), emails: (await worker.sentCount()) - sentBefore, digests: opened, materializedIn }
}

/** Where each run's cost per event is spent: ingest, materialize (notify-events), dispatch (notify-dispatch). */
function printByHandler(runs: Record<string, { instant: Measured; digested: Measured; events: number }>): void {
  const rows: string[][] = []
  for (const [size, run] of Object.entries(runs)) {
    for (const [name, measured] of [
      ['instant', run.instant],
      ['digested', run.digested],
    ] as const) {
      for (const handler of ['ingest', 'notify-events', 'notify-dispatch']) {
        const cost = costPer(
          measured.lines.filter((line) => line.handler === handler),
          run.events,
        )
        rows.push([
          size,
          name,
          handler,
          String(cost.d1_statements),
          String(cost.d1_round_trips),
          String(cost.d1_rows_read),
          String(cost.d1_rows_written),
          String(cost.queue_operations),
        ])
      }
    }
  }
  progress('digest_cost: per event, by handler (events a request, run, handler)')
  console.log(
    renderTable(
      ['EVENTS A REQUEST', 'RUN', 'HANDLER', 'D1 STATEMENTS', 'ROUND TRIPS', 'ROWS READ', 'ROWS WRITTEN', 'QUEUE OPS'],
      rows,
    ),
  )
}
