import { DB_SHARDS_MAX, EVENTS_QUEUE_SHARDS_MAX, withBindings } from '../config.ts'
import { dbBindingOf } from '../d1/shard-names.ts'
import type { Logger } from '../log.ts'
import { eventsBindingOf } from '../queue/names.ts'
import { type Cost, noCost } from './cost.ts'
import { meteredKv, meteredQueue } from './metered-bindings.ts'
import { meteredD1 } from './metered-d1.ts'

const QUEUE_BINDINGS = ['EVENTS', 'DISPATCH', 'DLQ', 'EMAIL_EVENTS'] as const

/**
 * An invocation's env with its D1, KV and queue bindings metered, and the
 * cost they count. Each invocation gets its own, so concurrent batches of one
 * isolate never mix their counts.
 */
export function meterEnv(env: Env): { env: Env; cost: Cost } {
  const cost = noCost()
  const bindings: Partial<Env> = {}
  // A binding a test's env leaves out stays out.
  if (env.DB) bindings.DB = meteredD1(env.DB, cost)
  if (env.IDEMPOTENCY) bindings.IDEMPOTENCY = meteredKv(env.IDEMPOTENCY, cost)
  for (const name of QUEUE_BINDINGS) if (env[name]) bindings[name] = meteredQueue(env[name], cost)
  // The shards of notify-events and of D1 past the first (EVENTS_1, DB_1, …), which the generated Env does not name.
  const shards = bindings as Record<string, Queue | D1Database>
  const given = env as unknown as Record<string, Queue | D1Database | undefined>
  for (let shard = 1; shard < EVENTS_QUEUE_SHARDS_MAX; shard++) {
    const queue = given[eventsBindingOf(shard)] as Queue | undefined
    if (queue) shards[eventsBindingOf(shard)] = meteredQueue(queue, cost)
  }
  const dbShards = Array.from(
    { length: DB_SHARDS_MAX },
    (_, shard) => given[dbBindingOf(shard)] as D1Database | undefined,
  )
  // With D1 shards, each one's statements apart as well: how evenly the recipients spread their work.
  if (dbShards.slice(1).some((db) => db !== undefined)) {
    cost.d1StatementsByShard = dbShards.slice(0, dbShards.findLastIndex((db) => db !== undefined) + 1).map(() => 0)
    if (env.DB) bindings.DB = meteredD1(env.DB, cost, 0)
  }
  for (let shard = 1; shard < DB_SHARDS_MAX; shard++) {
    const db = dbShards[shard]
    if (db) shards[dbBindingOf(shard)] = meteredD1(db, cost, shard)
  }
  return { env: withBindings(env, bindings), cost }
}

/**
 * One line per invocation of the pipeline (`invocation.cost`): what it cost
 * in D1, KV and queue operations. Workers Logs can sum it per handler; `npm
 * run bench` sums it per email.
 */
export function logCost(log: Logger, handler: string, cost: Cost): void {
  log.info('invocation.cost', { handler, ...cost })
}
