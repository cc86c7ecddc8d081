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
  if (env.IDEMPOTENCY) bindings.IDEMPOTENCY = meteredKv(env.IDEMPOTENCY, cost)
  for (const name of QUEUE_BINDINGS) if (env[name]) bindings[name] = meteredQueue(env[name], cost)
  // The shards of notify-events past the first (EVENTS_1, …) and of D1 (DB_1, …), which the generated Env does not name.
  const shards = bindings as Record<string, Queue | D1Database>
  const given = env as unknown as Record<string, Queue | D1Database | undefined>
  for (let shard = 1; shard < EVENTS_QUEUE_SHARDS_MAX; shard++) {
    const queue = given[eventsBindingOf(shard)] as Queue | undefined
    if (queue) shards[eventsBindingOf(shard)] = meteredQueue(queue, cost)
  }
  // DB and its shards; with shards, each one's statements apart as well: how evenly the recipients spread
  // their work.
  const dbShards = Array.from(
    { length: DB_SHARDS_MAX },
    (_, shard) => given[dbBindingOf(shard)] as D1Database | undefined,
  )
  const sharded = dbShards.slice(1).some((db) => db !== undefined)
  if (sharded) {
    cost.d1StatementsByShard = dbShards.slice(0, dbShards.findLastIndex((db) => db !== undefined) + 1).map(() => 0)
  }
  dbShards.forEach((db, shard) => {
    if (db) shards[dbBindingOf(shard)] = meteredD1(db, cost, sharded ? shard : undefined)
  })
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
