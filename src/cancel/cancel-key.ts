import { configOf } from '../config.ts'
import { primaryDb, shardEnvs } from '../d1/shards.ts'
import type { Logger } from '../log.ts'
import {
  type Cancellation,
  cancellationsOf,
  digestStatuses,
  endWithdrawnItems,
  givePlacesBack,
  itemsOfKeys,
  markCancelled,
  recordCancellations,
  WITHDRAWN_REASON,
  withdrawByKeys,
} from '../notifications/cancel.ts'

/** Who asks for a cancellation: an event of a cancelling type, or an operator through the API. */
export type CancellationRequest = Cancellation

/**
 * What a cancellation did to one notification of its key:
 * - `cancelled` — it had not gone out and never will (also one a cancellation of the same key ended before);
 * - `withdrawn` — an in-app item that was shown: removed from its feed and its open pages;
 * - `in-flight` — being sent as the cancellation came (an email claimed, a digest closing with it): it goes,
 *   or, if that try fails with nothing sent, it is cancelled at its retry instead of sent again (its
 *   status in the event's story says which);
 * - `too-late` — it went out (an email sent, or told in a digest already sent);
 * - `ended` — it had ended without going out (opted out, suppressed, failed …).
 */
export type CancelOutcome = 'cancelled' | 'withdrawn' | 'in-flight' | 'too-late' | 'ended'

/** A cancellation's answer: its key, when it was first recorded and by what, and each notification of the key. */
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
    /**
     * The transports of tries that never reported on this email and were taken
     * as not sent — when the email went on to the next transport, when a
     * cancellation that came while its outcome was unknown ended it, or when an
     * operator replayed it: it may have gone out through them, whatever the
     * outcome says. Empty when there was none.
     */
    unconfirmedThrough: string[]
  }[]
}

type Marked = {
  id: string
  event_id: string
  kind: string
  channel: string
  status: string
  status_reason: string | null
  recipient_user_id: string
  cancellation_key: string
  digest_id: string | null
  unconfirmed_through: string | null
}

/** Statuses in which a notification is being sent, or may still go out by itself. */
const IN_FLIGHT = new Set(['sending', 'unknown', 'pending', 'paused'])

/** Digest statuses whose email has not gone yet: a member told in one is on its way with it. */
const DIGEST_ON_ITS_WAY = new Set(['closing', 'pending', 'sending', 'paused', 'unknown'])

/**
 * Cancels keys, all at once: their in-app items are withdrawn from their
 * recipients' feeds first (which refuse them from then on, and tell the open
 * pages); then, in each D1 shard in one transaction, the keys are recorded
 * (so that an event of one that comes later creates nothing, wherever its
 * recipients are), every notification of them that has not gone out is
 * withdrawn and gives back its throttle place, and the others are marked;
 * last, the in-app notifications that were shown end `cancelled`. Its cost
 * does not grow with the number of keys: three D1 calls per shard, one per
 * feed, one read. Each step may run again — a second cancellation of a key,
 * or this one tried again after a failure, changes nothing more and answers
 * the same. Throws when D1 or a feed fails (the caller tries again).
 */
export async function cancelKeys(
  env: Env,
  requests: readonly CancellationRequest[],
  now: Date,
  log: Logger,
): Promise<CancelReport[]> {
  if (requests.length === 0) return []
  const nowIso = now.toISOString()
  const keys = [...new Set(requests.map((request) => request.key))]
  const shards = shardEnvs(env, configOf(env).DB_SHARDS)
  // The items first: a failure here leaves D1 as it was, and the whole cancellation is tried again.
  const items = (await Promise.all(shards.map((shard) => itemsOfKeys(shard.DB, keys).all<Marked>()))).flatMap(
    (result) => result.results,
  )
  await withdrawItems(env, items, nowIso)
  const marked = (
    await Promise.all(
      shards.map(async (shard) => {
        const results = await shard.DB.batch<Marked>([
          recordCancellations(shard.DB, requests, nowIso),
          withdrawByKeys(shard.DB, keys, nowIso),
          givePlacesBack(shard.DB, keys, nowIso),
          markCancelled(shard.DB, keys, nowIso),
        ])
        const rows = results[3]?.results ?? []
        const digests = [
          ...new Set(rows.flatMap((row) => (row.status === 'digested' && row.digest_id ? [row.digest_id] : []))),
        ]
        const statuses =
          digests.length === 0
            ? []
            : (await digestStatuses(shard.DB, digests).all<{ id: string; status: string }>()).results
        return { shard, rows, digests: new Map(statuses.map((digest) => [digest.id, digest.status])) }
      }),
    )
  ).flatMap(({ shard, rows, digests }) => rows.map((row) => ({ shard, row, digests })))
  // An item that reached its feed after the first withdrawal (written and sent in between) goes now.
  const known = new Set(items.map((item) => item.id))
  await withdrawItems(
    env,
    marked
      .map(({ row }) => row)
      .filter((row) => row.channel === 'in-app' && row.status === 'sent' && !known.has(row.id)),
    nowIso,
  )
  await Promise.all(
    shards.map((shard) =>
      marked.some((entry) => entry.shard === shard && entry.row.channel === 'in-app' && entry.row.status === 'sent')
        ? endWithdrawnItems(shard.DB, keys, nowIso).run()
        : undefined,
    ),
  )
  const recorded = new Map(
    (
      await cancellationsOf(primaryDb(env), keys).all<{ key: string; cancelled_at: string; source: 'event' | 'api' }>()
    ).results.map((row) => [row.key, row]),
  )
  const reports = keys.map((key): CancelReport => {
    const first = recorded.get(key)
    const source = first?.source ?? (requests.find((request) => request.key === key)?.source as 'event' | 'api')
    const notifications = marked
      .filter(({ row }) => row.cancellation_key === key)
      .map(({ row, digests }) => {
        const outcome = outcomeOf(row, digests)
        return {
          id: row.id,
          eventId: row.event_id,
          kind: row.kind,
          channel: row.channel,
          recipientUserId: row.recipient_user_id,
          status: outcome === 'withdrawn' ? 'cancelled' : row.status,
          outcome,
          unconfirmedThrough: row.unconfirmed_through?.split(',') ?? [],
        }
      })
    return { key, cancelledAt: first?.cancelled_at ?? nowIso, source, notifications }
  })
  const counts: Record<string, number> = { keys: keys.length }
  for (const report of reports)
    for (const entry of report.notifications) counts[entry.outcome] = (counts[entry.outcome] ?? 0) + 1
  log.info('cancellation.applied', { source: requests[0]?.source, ...counts })
  return reports
}

/** Cancels one key (./cancelKeys). */
export async function cancelKey(env: Env, request: CancellationRequest, now: Date, log: Logger): Promise<CancelReport> {
  const [report] = await cancelKeys(env, [request], now, log)
  return report as CancelReport
}

/** Withdraws these notifications' items from their recipients' feeds: one call per recipient. */
async function withdrawItems(
  env: Env,
  items: readonly Pick<Marked, 'id' | 'recipient_user_id'>[],
  nowIso: string,
): Promise<void> {
  const byRecipient = Map.groupBy(items, (item) => item.recipient_user_id)
  await Promise.all(
    [...byRecipient].map(([userId, list]) =>
      env.INBOX.getByName(userId).withdraw(
        list.map((item) => item.id),
        nowIso,
      ),
    ),
  )
}

function outcomeOf(row: Marked, digests: ReadonlyMap<string, string>): CancelOutcome {
  if (row.channel === 'in-app' && (row.status === 'sent' || row.status_reason?.startsWith(WITHDRAWN_REASON)))
    return 'withdrawn'
  if (row.status === 'cancelled') return 'cancelled'
  if (IN_FLIGHT.has(row.status)) return 'in-flight'
  if (row.status === 'digested') {
    return DIGEST_ON_ITS_WAY.has(digests.get(row.digest_id ?? '') ?? '') ? 'in-flight' : 'too-late'
  }
  if (row.status === 'sent') return 'too-late'
  return 'ended'
}
