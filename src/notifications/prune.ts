import { deleteOldest } from '../sql.ts'
import { finalStatusSql } from './sql.ts'

/**
 * Retention of a notification's content: the recipient snapshot (address,
 * name, time zone, the address's pseudonym), subject, text and HTML bodies,
 * unsubscribe link and template model of the oldest final notifications
 * last changed before `before`, at most `limit` of them. Last changed, not
 * created: a notification that ended late (a paused transport's backlog, a
 * long contact wait, a replay) keeps its content for the whole retention
 * after it ended, for its story, a replay and the throttle's count. The
 * search walks the index by creation, which is never later than the last
 * change, and skips the few that changed since. The row stays — ids,
 * kind, status, delivery status, times — so an event's story and the counts
 * still hold, and `content_removed_at`/`content_removed_by` say what became of
 * the rest. A notification that is not final keeps everything: it may still
 * be sent. The rows are picked by a LIMITed search on the partial index
 * `notifications_unpruned`, so one run is one short write. The index is named:
 * left to itself, SQLite picks `notifications_due` for the status list and
 * sorts every final notification there is, every minute.
 * Parameters: before, now, limit.
 */
export function pruneNotificationContent(
  db: D1Database,
  before: string,
  now: string,
  limit: number,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET recipient_email = NULL, recipient_name = NULL, time_zone = NULL,
         recipient_hash = NULL, subject = NULL, text_body = NULL, html_body = NULL, unsubscribe_url = NULL,
         model = NULL, content_removed_at = ?2, content_removed_by = 'retention'
       WHERE id IN (SELECT id FROM notifications INDEXED BY notifications_unpruned
                    WHERE content_removed_at IS NULL AND created_at < ?1 AND updated_at < ?1 AND ${finalStatusSql()}
                    ORDER BY created_at LIMIT ?3)`,
    )
    .bind(before, now, limit)
}

/**
 * Retention of a notification's row: deletes the oldest final notifications
 * last changed before `before` whose content retention (or an erasure) has
 * already removed, at most `limit` of them, with their delivery events and
 * any exact message kept of them first — one transaction of three statements
 * that pick the same notifications: by primary key from a LIMITed search on
 * the partial index `notifications_stubs` (only rows whose content is gone
 * are in it). The configuration keeps the content retention no longer than
 * the row's, so a row is always a stub before it goes, and the exact message
 * no longer than the row. The suppressions its events caused stay.
 * Parameters: before, limit.
 */
export function pruneNotificationRows(db: D1Database, before: string, limit: number): D1PreparedStatement[] {
  const due = `SELECT id FROM notifications INDEXED BY notifications_stubs
               WHERE content_removed_at IS NOT NULL AND created_at < ?1 AND updated_at < ?1 AND ${finalStatusSql()}
               ORDER BY created_at LIMIT ?2`
  return [
    db.prepare(`DELETE FROM delivery_events WHERE notification_id IN (${due})`).bind(before, limit),
    db.prepare(`DELETE FROM sent_messages WHERE notification_id IN (${due})`).bind(before, limit),
    db.prepare(`DELETE FROM notifications WHERE id IN (${due})`).bind(before, limit),
  ]
}

/**
 * Retention of the exact messages sent: deletes the oldest `sent_messages`
 * rows sent before `before`, at most `limit`, by primary key from a LIMITed
 * search on `sent_messages_sent_at`. The notification keeps its provider id
 * and sent time. Parameters: before, limit.
 */
export function pruneSentMessages(db: D1Database, before: string, limit: number): D1PreparedStatement {
  return deleteOldest(db, 'sent_messages', 'notification_id', 'sent_at', before, limit)
}
