/**
 * Puts a `failed` notification back to `pending`, due now — unless retention
 * or an erasure removed its content: there is nothing left to send.
 * Parameters: id, now.
 */
export function resetFailedNotification(db: D1Database, id: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', scheduled_at = ?2, enqueued_at = ?2, error_code = NULL,
         status_reason = 'replayed by an operator', lease_until = NULL, updated_at = ?2
       WHERE id = ?1 AND status = 'failed' AND content_removed_at IS NULL`,
    )
    .bind(id, now)
}
