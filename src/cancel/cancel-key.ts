import { configOf } from '../config.ts'
import { primaryDb, shardEnvs } from '../d1/shards.ts'
import type { Logger } from '../log.ts'
import {
  cancellationOf,
  endWithdrawnItems,
  markCancelled,
  recordCancellation,
  withdrawByKey,
} from '../notifications/cancel.ts'

/** Who asks for a cancellation: an event of a cancelling type, or an operator through the API. */
export type CancellationRequest = {
  key: string
  source: 'event' | 'api'
  /** The cancelling event's idempotency key, or the operator's name. */
  by: string
  reason: string | null
}

/**
 * What a cancellation did to one notification of its key:
 * - `cancelled` — it had not gone out and never will (also one a cancellation of the same key ended before);
 * - `withdrawn` — an in-app item that was shown: removed from its feed and its open pages;
 * - `in-flight` — being sent as the cancellation came: it goes, or, if this try fails, it is
 *   cancelled at its retry instead of sent again (its status says which, in the event's story);
 * - `too-late` — it went out (an email sent, or told in a digest already closed);
 * - `ended` — it had ended without going out (opted out, suppressed, failed …).
 */
export type CancelOutcome = 'cancelled' | 'withdrawn' | 'in-flight' | 'too-late' | 'ended'

/** A cancellation's answer: its key, when it was first recorded, and each notification of the key. */
export type CancelReport = {
  key: string
  cancelledAt: string
  source: 'event' | 'api'
  notifications: {
    id: string
    eventId: string
    kind: string
    channel: string
    recipientUserId: string
    status: string
    outcome: CancelOutcome
  }[]
}

type Marked = {
  id: string
  event_id: string
  kind: string
  channel: string
  status: string
  recipient_user_id: string
}

/** Statuses in which a notification is being sent, or may still go out by itself. */
const IN_FLIGHT = new Set(['sending', 'unknown', 'pending', 'paused'])

/**
 * Cancels a key: records it (in every D1 shard, so that an event of the key
 * that comes later creates nothing wherever its recipients are), withdraws
 * every notification of the key that has not gone out, in each shard in one
 * transaction with the record, then withdraws the in-app items already shown
 * from their recipients' feeds (live on their open pages) and ends those
 * notifications `cancelled`. Each step may run again: a second cancellation
 * of the key, or this one retried after a failure, changes nothing more and
 * answers the same. Throws when D1 or a feed fails (the caller retries).
 */
export async function cancelKey(env: Env, request: CancellationRequest, now: Date, log: Logger): Promise<CancelReport> {
  const nowIso = now.toISOString()
  const reason = `cancelled by ${request.source === 'event' ? 'an event' : 'an operator'} (${request.key})${request.reason ? `: ${request.reason}` : ''}`
  const shards = shardEnvs(env, configOf(env).DB_SHARDS)
  const marked = (
    await Promise.all(
      shards.map(async (shard) => {
        const [, , touched] = await shard.DB.batch<Marked>([
          recordCancellation(shard.DB, request, nowIso),
          withdrawByKey(shard.DB, request.key, nowIso, reason),
          markCancelled(shard.DB, request.key, nowIso),
        ])
        return { shard, rows: touched?.results ?? [] }
      }),
    )
  ).flatMap(({ shard, rows }) => rows.map((row) => ({ shard, row })))
  // Every in-app item of the key, shown, on its way or never sent: withdrawn from its feed, which refuses it from
  // now on — also those a cancellation that failed half way ended already, whose items it may not have reached.
  const items = Map.groupBy(
    marked.filter(({ row }) => row.channel === 'in-app'),
    ({ row }) => row.recipient_user_id,
  )
  await Promise.all(
    [...items].map(([userId, list]) =>
      env.INBOX.getByName(userId).withdraw(
        list.map(({ row }) => row.id),
        nowIso,
      ),
    ),
  )
  const shown = marked.filter(({ row }) => row.channel === 'in-app' && row.status === 'sent')
  await Promise.all(
    shards.map((shard) => {
      const ids = shown.filter((entry) => entry.shard === shard).map(({ row }) => row.id)
      return ids.length === 0 ? undefined : endWithdrawnItems(shard.DB, ids, nowIso).run()
    }),
  )
  const recorded = await cancellationOf(primaryDb(env), request.key).first<{
    cancelled_at: string
    source: 'event' | 'api'
  }>()
  const notifications = marked.map(({ row }) => {
    const withdrawn = row.channel === 'in-app' && row.status === 'sent'
    return {
      id: row.id,
      eventId: row.event_id,
      kind: row.kind,
      channel: row.channel,
      recipientUserId: row.recipient_user_id,
      status: withdrawn ? 'cancelled' : row.status,
      outcome: outcomeOf(row, withdrawn),
    }
  })
  const counts = Object.groupBy(notifications, (entry) => entry.outcome)
  log.info('cancellation.applied', {
    source: request.source,
    ...Object.fromEntries(Object.entries(counts).map(([outcome, list]) => [outcome, list?.length ?? 0])),
  })
  return {
    key: request.key,
    cancelledAt: recorded?.cancelled_at ?? nowIso,
    source: recorded?.source ?? request.source,
    notifications,
  }
}

function outcomeOf(row: Marked, withdrawn: boolean): CancelOutcome {
  if (withdrawn) return 'withdrawn'
  if (row.status === 'cancelled') return 'cancelled'
  if (IN_FLIGHT.has(row.status)) return 'in-flight'
  if (row.status === 'sent' || row.status === 'digested') return 'too-late'
  return 'ended'
}
