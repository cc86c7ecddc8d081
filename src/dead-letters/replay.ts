import { configOf } from '../config.ts'
import { shardDbOfId } from '../d1/shards.ts'
import { resetForReplay } from '../notifications/replay.ts'
import { WORKER_LIMITS } from '../platform-limits.ts'
import { DispatchMessageSchema, dispatchFor } from '../queue/dispatch-message.ts'
import { eventQueues, sendEvents } from '../queue/event-queues.ts'
import { QUEUES } from '../queue/names.ts'
import { type Outgoing, sendAll } from '../queue/send.ts'
import { reducedBodyOf } from './dead-letter-store.ts'
import { markReplayed } from './resolve.ts'

/**
 * Bytes of dead-letter bodies one bulk replay call reads and sends. A body is
 * held several times over while it is replayed — D1's answer, the row, the
 * parsed value, the queue request — in an isolate of 128 MB that also holds
 * the code and other invocations, so a call keeps to a sixteenth of it. That
 * is also at most about 70 `sendBatch` calls (a message is at most 128 KB), far
 * below the invocation's subrequests.
 */
export const REPLAY_PAGE_BYTES = WORKER_LIMITS.memoryBytes / 16

/**
 * The rows of `candidates`, in order, that one bulk replay call takes: at
 * most `max`, and bodies of at most REPLAY_PAGE_BYTES together — the first
 * one always, so a page is never empty while something matches.
 */
export function replayPage<T extends { body_bytes: number | null }>(candidates: readonly T[], max: number): T[] {
  const page: T[] = []
  let bytes = 0
  for (const candidate of candidates.slice(0, max)) {
    bytes += candidate.body_bytes ?? 0
    if (page.length > 0 && bytes > REPLAY_PAGE_BYTES) break
    page.push(candidate)
  }
  return page
}

/** What a replay needs of a dead letter. */
export type ReplayRow = { id: string; queue: string; body: string }

/** The result of a replay. */
export type ReplayResult = { replayed: string[]; skipped: { id: string; reason: string }[] }

/**
 * Sends each dead letter's original message back to the queue it died on and
 * marks it `replayed` (counting replays). A notification that failed to send is
 * first put back to `pending`, so the replayed dispatch message can claim it;
 * one that never had content waits for its contact again. A dead letter
 * stored without its body is skipped: there is nothing to send.
 * An event that was processed since comes back as a duplicate: no second email —
 * within the deduplication window (PROCESSED_EVENTS_RETENTION_DAYS, and the
 * notification rows' retention after they ended); past both, nothing
 * remembers it, and it is planned again as a new event would be. A failed
 * notification that retention emptied or deleted is skipped with the reason.
 * `audit`, when given, is the audit row, run in the same D1 batch right
 * after the marks (given no count, its `changes()` is theirs). With D1
 * shards, `letters` is the shard the rows are kept in (src/d1/shards.ts) and
 * each notification is reset in its own; the audit row, written in the
 * primary, follows the marks of another shard as a write of its own, given
 * their count.
 */
export async function replayDeadLetters(
  env: Env,
  rows: readonly ReplayRow[],
  now: Date,
  audit?: (replayed?: number) => D1PreparedStatement,
  letters: D1Database = env.DB,
): Promise<ReplayResult> {
  const nowIso = now.toISOString()
  const waitUntil = new Date(now.getTime() + configOf(env).CONTACT_WAIT_HOURS * 3_600_000).toISOString()
  const skipped: ReplayResult['skipped'] = []
  const events: unknown[] = []
  const emailEvents: unknown[] = []
  const dispatches: Outgoing[] = []
  const resets: { db: D1Database; statement: D1PreparedStatement }[] = []
  const replayed: string[] = []
  const removed = await unsendable(env, rows)
  for (const row of rows) {
    const body: unknown = JSON.parse(row.body)
    if (isErased(body)) {
      skipped.push({ id: row.id, reason: 'its message was erased with its recipient' })
      continue
    }
    const reduced = reducedBodyOf(body)
    if (reduced) {
      skipped.push({
        id: row.id,
        reason: `its body was not stored (${reduced.cause}): the original is where its origin says, send it again from there`,
      })
      continue
    }
    if (row.queue === QUEUES.events) {
      events.push(body)
    } else if (row.queue === QUEUES.emailEvents) {
      emailEvents.push(body)
    } else if (row.queue === QUEUES.dispatch) {
      const message = DispatchMessageSchema.safeParse(body)
      if (!message.success) {
        skipped.push({ id: row.id, reason: 'the dead message is not a dispatch message' })
        continue
      }
      const gone = removed.get(message.data.notificationId)
      if (gone !== undefined) {
        skipped.push({ id: row.id, reason: gone })
        continue
      }
      // A fresh message for the reset's due time: the dead one names a time the row no longer has.
      dispatches.push(dispatchFor(message.data.notificationId, nowIso, now))
      const id = message.data.notificationId
      const db = shardDbOfId(env, id)
      resets.push({ db, statement: resetForReplay(db, id, nowIso, waitUntil) })
    } else {
      skipped.push({ id: row.id, reason: `it died on an unknown queue (${row.queue})` })
      continue
    }
    replayed.push(row.id)
  }
  // Before the resets: a shard counted but not bound fails the replay with nothing changed, and only when there are events.
  const eventsQueues = events.length > 0 ? eventQueues(env, configOf(env).EVENTS_QUEUE_SHARDS) : []
  // Each shard's resets in one batch of its own.
  await Promise.all(
    [...Map.groupBy(resets, (reset) => reset.db)].map(([db, list]) => db.batch(list.map((reset) => reset.statement))),
  )
  await sendEvents(eventsQueues, events)
  await sendAll(
    env.EMAIL_EVENTS,
    emailEvents.map((body) => ({ body })),
  )
  await sendAll(env.DISPATCH, dispatches)
  if (replayed.length > 0 && letters === env.DB) {
    await letters.batch([markReplayed(letters, replayed, nowIso), ...(audit ? [audit()] : [])])
  } else if (replayed.length > 0) {
    const [marked] = await letters.batch([markReplayed(letters, replayed, nowIso)])
    if (audit && marked?.meta.changes) await audit(replayed.length).run()
  }
  return { replayed, skipped }
}

/**
 * The notifications named by these dispatch dead letters that can no longer
 * be sent, with why: their content retention or an erasure removed their
 * content, or their row's retention deleted them. A replay of one would reset
 * nothing and send nothing, and be reported as replayed.
 */
async function unsendable(env: Env, rows: readonly ReplayRow[]): Promise<Map<string, string>> {
  const ids = rows.flatMap((row) => {
    if (row.queue !== QUEUES.dispatch) return []
    const message = DispatchMessageSchema.safeParse(JSON.parse(row.body))
    return message.success ? [message.data.notificationId] : []
  })
  if (ids.length === 0) return new Map()
  // Each notification in the D1 shard its id names.
  const parts = await Promise.all(
    [...Map.groupBy(ids, (id) => shardDbOfId(env, id))].map(async ([db, list]) => {
      const { results } = await db
        .prepare(
          'SELECT id, content_removed_at IS NOT NULL AS removed FROM notifications WHERE id IN (SELECT value FROM json_each(?1))',
        )
        .bind(JSON.stringify(list))
        .all<{ id: string; removed: number }>()
      return results
    }),
  )
  const found = new Map(parts.flat().map((row) => [row.id, row.removed === 1]))
  const gone = new Map<string, string>()
  for (const id of ids) {
    const removed = found.get(id)
    if (removed === undefined)
      gone.set(id, 'its notification no longer exists (its retention deleted it, or it was replaced)')
    else if (removed) gone.set(id, 'its notification no longer has content to send (retention or an erasure)')
  }
  return gone
}

/** Whether a dead letter's body is the placeholder an erasure left in place of the message (src/erasure/). */
function isErased(body: unknown): boolean {
  return typeof body === 'object' && body !== null && 'notifyEdgeErased' in body
}
