import { STATUS_AS_FILTER } from '../sql.ts'

/** Marks dead letters replayed and counts the replay. Parameters: JSON array of ids, now. */
export function markReplayed(db: D1Database, ids: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE dead_letters SET status = 'replayed', replays = replays + 1, replayed_at = ?2, resolved_at = ?2
       WHERE id IN (SELECT value FROM json_each(?1))`,
    )
    .bind(JSON.stringify(ids), now)
}

/** Discards a dead letter with the operator's reason; its retention counts from now. Parameters: id, reason, now. */
export function markDiscarded(db: D1Database, id: string, reason: string, now: string): D1PreparedStatement {
  return db
    .prepare(`UPDATE dead_letters SET status = 'discarded', discard_reason = ?2, resolved_at = ?3 WHERE id = ?1`)
    .bind(id, reason, now)
}

/**
 * Discards the open ones of `ids` with one reason, each a primary-key lookup
 * (`STATUS_AS_FILTER`). Parameters: JSON array of ids, reason, now.
 */
export function discardOpen(db: D1Database, ids: readonly string[], reason: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE dead_letters SET status = 'discarded', discard_reason = ?2, resolved_at = ?3
       WHERE id IN (SELECT value FROM json_each(?1)) AND ${STATUS_AS_FILTER} = 'open'
       RETURNING id`,
    )
    .bind(JSON.stringify(ids), reason, now)
}
