/**
 * `npm run bench` (BENCH_ONLY=shards): the pipeline with its recipients spread
 * over two D1 databases (DB_SHARDS=2, docs/scaling.md), and how evenly their
 * work spreads: N.shards events, each to a recipient of its own, through a
 * fresh Worker whose wrangler.toml binds a second database (DB_1); each
 * `invocation.cost` line counts every shard's statements apart
 * (`d1StatementsByShard`, src/metrics/invocation.ts), summed here per shard.
 */
import { startLocalWorker } from '../support/local-worker.ts'
import { twoDatabaseConfig } from '../support/two-databases.ts'
import { waitFor } from '../support/wait.ts'
import { costLines, costPer, messagesRead } from './costs.ts'
import { goals, N, progress, results } from './lib.ts'
import { BENCH_TOKEN_VARIABLES, BENCH_TOKENS, benchEvent, ingestRate, pipelineAt } from './pipeline.ts'

/** The goal: each shard's share of the statements within 10 % of an even share. */
const BALANCE_GOAL_PERCENT = 10

export async function benchShards() {
  const n = N.shards
  progress(`shards: ${n} events to ${n} recipients over two D1 databases`)
  const config = twoDatabaseConfig()
  const local = await startLocalWorker(
    { ...BENCH_TOKEN_VARIABLES, LOG_LEVEL: 'info', DB_SHARDS: '2' },
    { config: config.path, databases: ['DB', 'DB_1'] },
  )
  try {
    const before = local.output().length
    const rate = await ingestRate(
      pipelineAt(local.url, BENCH_TOKENS),
      Array.from({ length: n }, () => benchEvent()),
    )
    const lines = await waitFor(() => {
      const found = costLines(local.output().slice(before))
      const done = messagesRead(found, 'notify-events') >= n && messagesRead(found, 'notify-dispatch') >= n
      return done ? found : undefined
    }, "the pipeline's cost lines")
    const byShard = [0, 1].map((shard) =>
      lines.reduce(
        (sum, line) => sum + ((line as { d1StatementsByShard?: number[] }).d1StatementsByShard?.[shard] ?? 0),
        0,
      ),
    )
    const even = byShard.reduce((sum, value) => sum + value, 0) / byShard.length
    const imbalance = Math.round((Math.max(...byShard.map((value) => Math.abs(value - even))) / even) * 1000) / 10
    results.shards = {
      events: n,
      emails_per_second: rate,
      d1_statements_by_shard: byShard,
      d1_statements_per_email_by_shard: byShard.map((value) => Math.round((value / n) * 100) / 100),
      imbalance_percent: imbalance,
      per_email: costPer(lines, n),
    }
    goals.push({
      name: 'D1 shards: statements per shard, two shards',
      value: `${byShard.join(' / ')} (${imbalance} % off even)`,
      goal: `within ${BALANCE_GOAL_PERCENT} %`,
      met: imbalance <= BALANCE_GOAL_PERCENT,
    })
  } finally {
    await local.stop()
    config.remove()
  }
}
