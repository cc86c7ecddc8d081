/**
 * `npm run bench`: each relay beside its baselines, and the Worker pipeline
 * beside a bare Worker doing the same work, all measured in the same run on
 * this machine; the Worker's CPU, bundle and latency and the bridge's memory
 * against their budgets. Prints progress, a table of results, a table of goals
 * (met or not), and writes bench/results.json. Nothing here is asserted: the
 * goals are for reading (docs/benchmarks.md). Exits non-zero when a bench could
 * not run to its end.
 *
 * BENCH_SCALE (default 1) multiplies every message count; BENCH_ONLY=kafka runs
 * only the benches whose name holds it (BENCH_ONLY=digest: what a digested
 * event costs beside an instant one; BENCH_ONLY=preview: what template previews
 * take from the rest of the Worker; BENCH_ONLY=inbox: 1,000 idle in-app sockets'
 * memory and the time to push an item to each); `-- --profile` (or BENCH_PROFILE=1)
 * records a CPU profile of the Worker isolate during worker_pipeline.
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { renderTable } from '../bin/table.ts'
import { benchCapacity } from './capacity.ts'
import { benchDigest } from './digest.ts'
import { benchInbox } from './inbox.ts'
import { benchKafka } from './kafka.ts'
import { benchLargest } from './largest.ts'
import { budget, goals, progress, results, SCALE } from './lib.ts'
import { benchPostgres } from './pg.ts'
import { benchPreviewLoad } from './preview-load.ts'
import { benchRabbit } from './rabbitmq.ts'
import { benchResendRate } from './resend-rate.ts'
import { benchShards } from './shards.ts'
import { benchWorker, bundleGzipBytes } from './worker.ts'

execFileSync('bash', ['scripts/services-up.sh'], { stdio: 'ignore' })
/** BENCH_ONLY=rabbitmq (a part of a bench's name) runs only the benches it names. */
const ONLY = process.env.BENCH_ONLY

const started = Date.now()
let failed = false
for (const [name, bench] of [
  ['pg_relay', benchPostgres],
  ['rabbitmq_relay', benchRabbit],
  ['kafka_relay', benchKafka],
  ['worker_pipeline + end_to_end', benchWorker],
  ['worker_pipeline: resend at its rate limit', benchResendRate],
  ['digest_cost', benchDigest],
  ['capacity', benchCapacity],
  ['shards', benchShards],
  ['largest', benchLargest],
  ['preview_load', benchPreviewLoad],
  ['inbox', benchInbox],
  [
    'worker',
    async () => {
      progress('worker: the bundle wrangler deploy would upload')
      results.worker = { bundle_gzip_bytes: bundleGzipBytes() }
    },
  ],
] as const) {
  if (ONLY && !name.includes(ONLY)) continue
  try {
    await bench()
  } catch (error) {
    progress(`${name} failed: ${(error as Error).message}`)
    results[name] = { error: (error as Error).message }
    failed = true
  }
}
if (results.bridge) budget('bridge peak RSS (relay benches)', results.bridge.peak_rss_mb as number, 150, 'MB')

const machine = {
  cpus: cpus().length,
  cpu_model: cpus()[0]?.model,
  memory_gb: Math.round(totalmem() / 2 ** 30),
  node: process.version,
  scale: SCALE,
}
writeFileSync(
  'bench/results.json',
  `${JSON.stringify(
    {
      ran_at: new Date().toISOString(),
      seconds: Math.round((Date.now() - started) / 1000),
      machine,
      ...results,
      goals: Object.fromEntries(
        goals.map((goal) => [goal.name, `${goal.value} (goal ${goal.goal})${goal.met ? '' : ' NOT MET'}`]),
      ),
    },
    null,
    2,
  )}\n`,
)
const rows: string[][] = []
for (const [bench, values] of Object.entries(results)) {
  for (const [key, value] of Object.entries(values))
    rows.push([bench, key, typeof value === 'object' ? JSON.stringify(value) : String(value)])
}
console.log(`\n${renderTable(['BENCH', 'KEY', 'VALUE'], rows)}`)
console.log(
  `\n${renderTable(
    ['GOAL', 'THIS RUN', 'TARGET', ''],
    goals.map((goal) => [goal.name, goal.value, goal.goal, goal.met ? 'met' : 'NOT MET']),
  )}\n\nwritten to bench/results.json`,
)
// A bench that failed is a failed run, whatever the others measured; a goal not met is reported, not failed.
process.exit(failed ? 1 : 0)
