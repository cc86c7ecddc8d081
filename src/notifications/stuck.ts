import { claimable } from './sql.ts'

/**
 * Notifications the dispatch queue lost track of: `pending` past their time
 * (and not re-enqueued within the grace), or `sending` past their lease.
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
       WHERE ${claimable('?2', '?1')} AND (status <> 'pending' OR enqueued_at IS NULL OR enqueued_at <= ?2)
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
