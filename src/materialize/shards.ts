import { primaryDb, shardEnvs, shardOfRecipient } from '../d1/shards.ts'
import { PipelineError } from '../errors.ts'
import type { Settlement } from '../queue/policy.ts'
import { EventsRun } from './run.ts'
import type { Enqueued } from './stages/enqueue.ts'
import type { Known } from './stages/known.ts'

/** What one run of the stages from planning to release makes of its events (src/materialize/events-consumer.ts). */
export type Materialize = (run: EventsRun, known: readonly Known[]) => Promise<readonly Enqueued[]>

/**
 * The batch's events written shard by shard (D1 shards, src/d1/shards.ts).
 * Each event goes to every shard that holds one of its recipients (or the
 * person of its contact), and only to the primary when it has none (an
 * ignored event). Each shard plans the event whole from its own context and
 * writes its recipients' part with its own processed mark, in its own
 * transaction — so an event fanned out to two shards is processed once in
 * each, whatever crashes between: a redelivery finds the shards that
 * committed by their marks (a duplicate there) and writes the others.
 * An event ends (acked) only when every one of its shards has written it;
 * where any failed, it fails as that shard decided (the worst: a dead
 * letter before a retry), and is tried again everywhere.
 *
 * @returns the events every shard wrote, as their first shard made them
 */
export async function materializeSharded(
  run: EventsRun,
  batch: MessageBatch<unknown>,
  known: readonly Known[],
  count: number,
  materialize: Materialize,
): Promise<Enqueued[]> {
  let pool: string[] = []
  try {
    if (known.some(needsPool)) pool = await reviewerPool(primaryDb(run.env))
  } catch (cause) {
    // Without the pool, no event can be placed: each is retried (a D1 outage, as any other).
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 read: ${(cause as Error).message}`, { cause })
    for (const item of known) run.fail(item, error, { messageId: item.message.id, stage: 'shards' })
    return []
  }
  const shardOfUser = new Map<string, number>()
  const shardsOf = new Map<Known, number[]>()
  for (const item of known) {
    const users = usersOf(item, pool)
    for (const user of users) {
      if (!shardOfUser.has(user)) shardOfUser.set(user, await shardOfRecipient(user, count))
    }
    const shards = [...new Set(users.map((user) => shardOfUser.get(user) as number))].sort((a, b) => a - b)
    shardsOf.set(item, shards.length > 0 ? shards : [0])
  }
  const parts = shardEnvs(run.env, count)
    .map((env, shard) => {
      const items = known.filter((item) => shardsOf.get(item)?.includes(shard))
      const counts = new Set(items.filter((item) => shardsOf.get(item)?.[0] === shard).map((item) => item.message))
      const shardRun = new EventsRun(batch, env, run.log, {
        // A recipient the pool gained since it was read here is placed by its own hash, not dropped.
        holds: async (user) => (shardOfUser.get(user) ?? (await shardOfRecipient(user, count))) === shard,
        counts,
      })
      return { shard, items, shardRun }
    })
    .filter((part) => part.items.length > 0)
  const done = await Promise.all(
    parts.map(async ({ shard, items, shardRun }) => {
      try {
        return await materialize(shardRun, items)
      } catch (error) {
        // The stages settle what fails; one that threw (a bug) leaves its events unsettled: retried.
        run.log.error('materialize.shard-failed', { shard, error })
        return []
      }
    }),
  )
  const made = Map.groupBy(done.flat(), (written) => written.message)
  const ended: Enqueued[] = []
  for (const item of known) {
    const shards = shardsOf.get(item) as number[]
    const settled = parts.flatMap((part) => {
      if (!shards.includes(part.shard)) return []
      const settlement = part.shardRun.settlements.of(item.message)
      return settlement ? [settlement] : []
    })
    const failed = worst(settled)
    if (failed) {
      run.settlements.settle(item.message, failed)
      // Counted here, once, whichever shards failed it (a shard's run counts none: src/materialize/run.ts).
      if (failed.action === 'dead-letter') run.count(item.inbound.source, 'dead-lettered')
      continue
    }
    const written = made.get(item.message) ?? []
    // Written by every one of its shards: ended as the first made it. One no shard settled and none
    // wrote is a bug: left unsettled, it is retried by the run's end.
    if (written.length === shards.length) ended.push(written[0] as Enqueued)
  }
  return ended
}

/** The worst of several shards' settlements of one message: a dead letter, then the longest retry. */
function worst(settled: readonly Settlement[]): Settlement | undefined {
  const dead = settled.find((settlement) => settlement.action === 'dead-letter')
  if (dead) return dead
  const retries = settled.filter((settlement) => settlement.action === 'retry')
  return retries.sort((a, b) => (b.delaySeconds ?? 0) - (a.delaySeconds ?? 0))[0]
}

function needsPool(item: Known): boolean {
  return item.type === 'valid' && item.work.intent.type === 'notify' && item.work.intent.recipients === 'reviewer-pool'
}

/** The user ids an event writes rows for: its recipients (the pool's members for the pool), or its contact's person. */
function usersOf(item: Known, pool: readonly string[]): string[] {
  if (item.type !== 'valid') return []
  const { intent } = item.work
  if (intent.type === 'contact') return [intent.contact.userId]
  if (intent.type !== 'notify') return []
  return intent.recipients === 'reviewer-pool' ? [...pool] : intent.recipients.map((recipient) => recipient.userId)
}

async function reviewerPool(db: D1Database): Promise<string[]> {
  const { results } = await db.prepare('SELECT user_id FROM reviewer_pool ORDER BY user_id').all<{ user_id: string }>()
  return results.map((row) => row.user_id)
}
