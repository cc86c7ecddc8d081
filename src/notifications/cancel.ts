import { TAKEN_AS_NOT_SENT } from './sql.ts'

/**
 * Withdrawing the notifications of cancellation keys (src/cancel/): every
 * one that has not gone out ends `cancelled`; the others are marked with the
 * cancellation's time, so that one in flight now whose send fails is ended
 * at its retry's claim instead of sent again (./gates.ts, ./bundles.ts).
 * Each statement is one UPDATE, so a claim that runs beside it in D1 either
 * took the notification first (it is in flight: the cancellation reports it)
 * or finds it cancelled — never both. Every statement takes the keys as one
 * JSON array: a batch of cancellations costs what one does.
 */

/**
 * What has not gone out and can be withdrawn: waiting to be claimed, never
 * tried or tried without any chance of having gone (no `maybe_sent_at`: a
 * bundle that was never requested is sent again without it), waiting for its
 * contact, its in-app item, or a paused transport, or told in a digest still
 * collecting.
 */
const WITHDRAWABLE = `(
  (status IN ('pending', 'paused') AND maybe_sent_at IS NULL)
  OR status IN ('escalating', 'awaiting-contact')
  OR (status = 'digested' AND digest_id IN (SELECT d.id FROM notifications d WHERE d.status = 'collecting'))
)`

const OF_KEYS = 'cancellation_key IN (SELECT value FROM json_each(?1))'

/** A cancellation as it is recorded. */
export type Cancellation = { key: string; source: 'event' | 'api'; by: string; reason: string | null }

/**
 * Records each cancellation once (the first one's time, source and reason
 * stay). Parameters: JSON array of cancellations, now.
 */
export function recordCancellations(
  db: D1Database,
  cancellations: readonly Cancellation[],
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO cancellations (key, cancelled_at, source, by, reason)
       SELECT json_extract(value, '$.key'), ?2, json_extract(value, '$.source'), json_extract(value, '$.by'),
         json_extract(value, '$.reason')
       FROM json_each(?1) WHERE true
       ON CONFLICT (key) DO NOTHING`,
    )
    .bind(JSON.stringify(cancellations), now)
}

/** The cancellations of these keys as recorded. Parameters: JSON array of keys. */
export function cancellationsOf(db: D1Database, keys: readonly string[]): D1PreparedStatement {
  return db
    .prepare('SELECT key, cancelled_at, source FROM cancellations WHERE key IN (SELECT value FROM json_each(?1))')
    .bind(JSON.stringify(keys))
}

/** The in-app notifications of these keys not ended `cancelled` yet: their items are withdrawn first. Parameters: keys. */
export function itemsOfKeys(db: D1Database, keys: readonly string[]): D1PreparedStatement {
  return db
    .prepare(
      `SELECT id, recipient_user_id FROM notifications WHERE ${OF_KEYS} AND channel = 'in-app' AND status <> 'cancelled'`,
    )
    .bind(JSON.stringify(keys))
}

/**
 * Ends `cancelled` every notification of the keys that has not gone out (a
 * digest's member leaves its digest, which closes without it), its reason
 * naming its cancellation as first recorded (an operator's free text stays
 * in the cancellation and the audit trail, not on the recipient's rows).
 * Parameters: JSON array of keys, now.
 */
export function withdrawByKeys(db: D1Database, keys: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'cancelled', digest_id = NULL, lease_until = NULL,
         cancelled_at = coalesce(cancelled_at, ?2), updated_at = ?2,
         status_reason = (SELECT 'cancelled by ' || CASE c.source WHEN 'event' THEN 'an event' ELSE 'an operator' END
                            || ' (' || c.key || ')' || CASE WHEN c.source = 'event' AND c.reason IS NOT NULL
                                                           THEN ': ' || c.reason ELSE '' END
                          FROM cancellations c WHERE c.key = notifications.cancellation_key) || ${TAKEN_AS_NOT_SENT}
       WHERE ${OF_KEYS} AND ${WITHDRAWABLE}`,
    )
    .bind(JSON.stringify(keys), now)
}

/**
 * Gives back the throttle places of the notifications `withdrawByKeys` just
 * ended (`updated_at` is now): a place is an email the window counts as
 * sent, and a withdrawn one never is. A place is the time its notification
 * was written, and notifications written together share it: one place of
 * that time goes per notification withdrawn, no more. Parameters: JSON array
 * of keys, now.
 */
export function givePlacesBack(db: D1Database, keys: readonly string[], now: string): D1PreparedStatement {
  const withdrawn = `SELECT recipient_user_id, kind, channel, created_at FROM notifications
    WHERE ${OF_KEYS} AND status = 'cancelled' AND throttled = 1 AND updated_at = ?2`
  return db
    .prepare(
      `UPDATE throttle_windows SET places = (
         SELECT json_group_array(value) FROM (
           SELECT p.value FROM (
             SELECT value, row_number() OVER (PARTITION BY value ORDER BY key) AS nth
             FROM json_each(throttle_windows.places)) p
           WHERE p.nth > (SELECT count(*) FROM (${withdrawn}) w
                          WHERE w.created_at = p.value AND w.recipient_user_id = throttle_windows.user_id
                            AND w.kind = throttle_windows.kind AND w.channel = throttle_windows.channel)
           ORDER BY p.value))
       WHERE (user_id, kind, channel) IN (SELECT recipient_user_id, kind, channel FROM (${withdrawn}))`,
    )
    .bind(JSON.stringify(keys), now)
}

/**
 * Marks every notification of the keys with the cancellation's time (kept if
 * one was there), and returns each as it stands after `withdrawByKeys` in the
 * same transaction: what the cancellation did to it. Parameters: keys, now.
 */
export function markCancelled(db: D1Database, keys: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET cancelled_at = coalesce(cancelled_at, ?2)
       WHERE ${OF_KEYS}
       RETURNING id, event_id, kind, channel, status, status_reason, recipient_user_id, cancellation_key, digest_id,
                 unconfirmed_through`,
    )
    .bind(JSON.stringify(keys), now)
}

/** The status of the digests these notifications were told in. Parameters: JSON array of digest ids. */
export function digestStatuses(db: D1Database, ids: readonly string[]): D1PreparedStatement {
  return db
    .prepare('SELECT id, status FROM notifications WHERE id IN (SELECT value FROM json_each(?1))')
    .bind(JSON.stringify(ids))
}

/** What an in-app notification shown and then withdrawn says, before its key. */
export const WITHDRAWN_REASON = 'shown, then withdrawn from the feed by a cancellation'

/**
 * Ends `cancelled` the in-app notifications of the keys that were shown:
 * their items are withdrawn from their feeds. Parameters: JSON array of keys, now.
 */
export function endWithdrawnItems(db: D1Database, keys: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'cancelled', status_reason = ?3 || ' (' || cancellation_key || ')', updated_at = ?2
       WHERE ${OF_KEYS} AND channel = 'in-app' AND status = 'sent'`,
    )
    .bind(JSON.stringify(keys), now, WITHDRAWN_REASON)
}

/**
 * Ends `cancelled` the members of a bundle that a cancellation marked while
 * they were in flight and that came back without any chance of having gone:
 * the bundle is then sent again without them. Parameters: bundle id, now.
 */
export function endCancelledMembers(db: D1Database, batchId: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'cancelled', status_reason = 'cancelled while it was in flight; its retry is not sent',
         lease_until = NULL, updated_at = ?2
       WHERE batch_id = ?1 AND status = 'pending' AND cancelled_at IS NOT NULL AND maybe_sent_at IS NULL`,
    )
    .bind(batchId, now)
}

/** The guard an insert of a notification with a cancellation key takes: its key was not cancelled in this database. */
export const NOT_CANCELLED = 'NOT EXISTS (SELECT 1 FROM cancellations c WHERE c.key = {cancellation_key})'

/** Which notifications a bulk cancellation looks at: every given condition holds. */
export type CancelFilter = {
  kind?: string
  recipientUserId?: string
  keyPrefix?: string
  createdAfter?: string
  createdBefore?: string
}

/**
 * The cancellation keys of notifications that match the filter and could be
 * withdrawn now, with how many of them match and their oldest's time, oldest
 * first, at most `limit`. Parameters: kind, recipient, key prefix, after,
 * before, limit.
 */
export function withdrawableKeys(db: D1Database, filter: CancelFilter, limit: number): D1PreparedStatement {
  return db
    .prepare(
      `SELECT cancellation_key AS key, count(*) AS waiting, min(created_at) AS first FROM notifications
       WHERE cancellation_key IS NOT NULL AND ${WITHDRAWABLE}
         AND (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR recipient_user_id = ?2)
         AND (?3 IS NULL OR substr(cancellation_key, 1, length(?3)) = ?3)
         AND (?4 IS NULL OR created_at > ?4) AND (?5 IS NULL OR created_at < ?5)
       GROUP BY cancellation_key ORDER BY first, key LIMIT ?6`,
    )
    .bind(
      filter.kind ?? null,
      filter.recipientUserId ?? null,
      filter.keyPrefix ?? null,
      filter.createdAfter ?? null,
      filter.createdBefore ?? null,
      limit,
    )
}
