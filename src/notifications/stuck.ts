import { claimable } from './sql.ts'

/**
 * Notifications the dispatch queue has no message for: `pending` and due but
 * never enqueued (released from a pause), `pending` past their time by the
 * grace (their message was lost: a retry's own message arrives at its time,
 * so a retry is never enqueued twice), `sending` past their lease, or a
 * digest past its close by the grace whose message was lost (`collecting`),
 * or whose close died half way (`closing`, stamped when it was fenced), or
 * an email past the end of its wait for its in-app item by the grace whose
 * message was lost (`escalating`).
 * Its first condition is implied by the second — pending and due by the later
 * of the two times, or sending — and is there for SQLite: it reads those
 * through the `(status, scheduled_at)` index, where the second alone, an OR
 * of statuses, made it scan every notification ever written, every minute.
 * Parameters: now, cutoff (now minus the grace), limit.
 */
export function selectStuckNotifications(
  db: D1Database,
  now: string,
  cutoff: string,
  limit: number,
): D1PreparedStatement {
  return db
    .prepare(
      `SELECT id, scheduled_at FROM notifications
       WHERE ((status = 'pending' AND scheduled_at <= max(?1, ?2)) OR status = 'sending'
              OR (status IN ('collecting', 'escalating') AND scheduled_at <= ?2) OR status = 'closing')
         AND ((status = 'pending' AND enqueued_at IS NULL AND scheduled_at <= ?1)
          OR (${claimable('?2', '?1')} AND (status <> 'pending' OR enqueued_at IS NULL OR enqueued_at <= ?2))
          OR (status IN ('collecting', 'closing', 'escalating') AND scheduled_at <= ?2
              AND (enqueued_at IS NULL OR enqueued_at <= ?2)))
       ORDER BY scheduled_at
       LIMIT ?3`,
    )
    .bind(now, cutoff, limit)
}

/** Records that these notifications were put on the dispatch queue again. Parameters: JSON array of ids, now. */
export function markEnqueued(db: D1Database, ids: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare('UPDATE notifications SET enqueued_at = ?2 WHERE id IN (SELECT value FROM json_each(?1))')
    .bind(JSON.stringify(ids), now)
}
