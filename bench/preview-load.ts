/**
 * `npm run bench` (BENCH_ONLY=preview): what template previews — the heaviest
 * request an operator, a viewer too, can make — take from everything else the
 * Worker answers. A preview renders synchronously in the isolate that also
 * runs the queue consumers, so while it renders nothing else there moves:
 * /healthz, answered beside it, shows how long the rest waits.
 *
 * Three measurements under `wrangler dev`: one expensive preview alone; twenty
 * of them sent at once by one operator (the attack of the security review);
 * and one operator sending them back to back for a few seconds.
 */
import { startLocalWorker } from '../support/local-worker.ts'
import { percentile, progress, results } from './lib.ts'
import { BENCH_TOKEN_VARIABLES, BENCH_TOKENS } from './pipeline.ts'

/** Nested loops with nothing to print: the cost is the looping, stopped only by a render limit. */
const LOOPS = '{% for a in (1..1000) %}{% for b in (1..1000) %}{% if a == b %}{% endif %}{% endfor %}{% endfor %}'
const EXPENSIVE = {
  kind: 'ResponseCreated',
  locale: 'en',
  subject: `Hello${LOOPS}`,
  textBody: `Text${LOOPS}`,
  htmlBody: `<p>HTML</p>${LOOPS}`,
}
const BURST = 20
const SERIAL_SECONDS = 5

/** Previews' cost to the rest of the Worker; writes results.preview_load. */
export async function benchPreviewLoad() {
  const local = await startLocalWorker(BENCH_TOKEN_VARIABLES)
  const timed = async <T>(work: () => Promise<T>): Promise<[T, number]> => {
    const start = performance.now()
    const value = await work()
    return [value, Math.round(performance.now() - start)]
  }
  const healthz = async () => (await timed(async () => (await fetch(`${local.url}/healthz`)).text()))[1]
  const ask = () =>
    fetch(`${local.url}/v1/templates/preview`, {
      method: 'POST',
      headers: { authorization: `Bearer ${BENCH_TOKENS.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify(EXPENSIVE),
    })
  const preview = async () => {
    const answer = await ask()
    await answer.arrayBuffer()
    return answer.status
  }
  /** /healthz asked again and again, one at a time, until `done` settles: each answer's time. */
  const probeUntil = async (done: Promise<unknown>) => {
    let over = false
    done.finally(() => {
      over = true
    })
    const times: number[] = []
    while (!over) times.push(await healthz())
    return times
  }
  try {
    const idle: number[] = []
    for (let i = 0; i < 20; i += 1) idle.push(await healthz())
    const [alone, aloneMs] = await timed(ask)
    const { error } = (await alone.json()) as { error?: { issues?: { message: string }[] } }

    progress(`preview_load: ${BURST} expensive previews at once by one operator, /healthz beside them`)
    const burst = Promise.all(Array.from({ length: BURST }, preview))
    const [[statuses, burstTimes], burstMs] = await timed(() => Promise.all([burst, probeUntil(burst)]))

    progress(`preview_load: one operator previewing back to back for ${SERIAL_SECONDS} s, /healthz beside it`)
    const until = Date.now() + SERIAL_SECONDS * 1000
    const serialStatuses: number[] = []
    const serial = (async () => {
      while (Date.now() < until) serialStatuses.push(await preview())
    })()
    const serialTimes = await probeUntil(serial)

    const tally = (list: number[]) =>
      Object.fromEntries([...new Set(list)].sort().map((status) => [status, list.filter((s) => s === status).length]))
    results.preview_load = {
      healthz_idle_p50_ms: percentile(idle, 50),
      one_preview: { status: alone.status, ms: aloneMs, stopped_by: error?.issues?.[0]?.message },
      [`burst_of_${BURST}`]: {
        answered: tally(statuses),
        all_answered_ms: burstMs,
        healthz_max_ms: Math.max(...burstTimes),
        healthz_p50_ms: percentile(burstTimes, 50),
      },
      [`back_to_back_${SERIAL_SECONDS}s`]: {
        answered: tally(serialStatuses),
        healthz_asked: serialTimes.length,
        healthz_max_ms: Math.max(...serialTimes),
        healthz_p50_ms: percentile(serialTimes, 50),
      },
    }
  } finally {
    await local.stop()
  }
}
