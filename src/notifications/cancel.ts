/**
 * Withdrawing the notifications of a cancellation key (src/cancel/): every
 * one that has not gone out ends `cancelled`; the others are marked with the
 * cancellation's time, so that one in flight now whose send fails is ended
 * at its retry's claim instead of sent again (./gates.ts). Each statement is
 * one UPDATE, so a claim that runs beside it in D1 either took the
 * notification first (it is in flight: the cancel reports it) or finds it
 * cancelled — never both.
 */

/**
 * What has not gone out and can be withdrawn: waiting to be claimed (never
 * tried, or tried without any chance of having gone: no `maybe_sent_at`,
 * not in a bundle that is sent whole), waiting for its contact, its in-app
 * item, or a paused transport, or told in a digest still collecting.
 */
const WITHDRAWABLE = `(
  (status IN ('pending', 'paused') AND batch_id IS NULL AND maybe_sent_at IS NULL)
  OR status IN ('escalating', 'awaiting-contact')
  OR (status = 'digested' AND digest_id IN (SELECT d.id FROM notifications d WHERE d.status = 'collecting'))
)`

/** Records a cancellation once (the first one's time and source stay). Parameters: key, now, source, by, reason. */
export function recordCancellation(
  db: D1Database,
  cancellation: { key: string; source: 'event' | 'api'; by: string; reason: string | null },
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO cancellations (key, cancelled_at, source, by, reason) VALUES (?1, ?2, ?3, ?4, ?5)
       ON CONFLICT (key) DO NOTHING`,
    )
    .bind(cancellation.key, now, cancellation.source, cancellation.by, cancellation.reason)
}

/** The cancellation of a key as recorded, if it was. Parameters: key. */
export function cancellationOf(db: D1Database, key: string): D1PreparedStatement {
  return db.prepare('SELECT key, cancelled_at, source, by, reason FROM cancellations WHERE key = ?1').bind(key)
}

/**
 * Ends `cancelled` every notification of the key that has not gone out (a
 * digest's member leaves its digest, which closes without it). Returns them.
 * Parameters: key, now, reason.
 */
export function withdrawByKey(db: D1Database, key: string, now: string, reason: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'cancelled', status_reason = ?3, digest_id = NULL, lease_until = NULL,
         cancelled_at = coalesce(cancelled_at, ?2), updated_at = ?2
       WHERE cancellation_key = ?1 AND ${WITHDRAWABLE}
       RETURNING id`,
    )
    .bind(key, now, reason)
}

/**
 * Marks every notification of the key with the cancellation's time (kept if
 * one was there), and returns each as it stands after `withdrawByKey` in the
 * same transaction: what the cancellation did to it. Parameters: key, now.
 */
export function markCancelled(db: D1Database, key: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET cancelled_at = coalesce(cancelled_at, ?2)
       WHERE cancellation_key = ?1
       RETURNING id, event_id, kind, channel, status, recipient_user_id`,
    )
    .bind(key, now)
}

/**
 * Ends `cancelled` the in-app notifications of these ids that were shown:
 * their items are withdrawn from their feeds. Parameters: JSON array of ids, now.
 */
export function endWithdrawnItems(db: D1Database, ids: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'cancelled', status_reason = 'shown, then withdrawn from the feed by a cancellation',
         updated_at = ?2
       WHERE id IN (SELECT value FROM json_each(?1)) AND channel = 'in-app' AND status = 'sent'`,
    )
    .bind(JSON.stringify(ids), now)
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
 * withdrawn now, with how many each has and its oldest's time, oldest first,
 * at most `limit`. Parameters: kind, recipient, key prefix, after, before, limit.
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
