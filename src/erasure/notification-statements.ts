import { finalStatusSql } from '../notifications/sql.ts'
import { bindErasure, type ErasureParameters } from './parameters.ts'

/**
 * A recipient's erasure, on the notification's side (src/erasure/ runs the
 * whole of it), with the parameters of every erasure statement
 * (src/erasure/parameters.ts: ?1 user ids, ?2 addresses, ?4 now).
 */

/** The notifications of the person: by recipient id, or by the address in their snapshot. */
export function notificationsOfPerson(alias = 'notifications'): string {
  return `(${alias}.recipient_user_id IN (SELECT value FROM json_each(?1))
           OR lower(${alias}.recipient_email) IN (SELECT value FROM json_each(?2)))`
}

/** Those of the person's notifications an erasure has not been through yet. */
export const NOTIFICATIONS_TO_ERASE = `${notificationsOfPerson()}
  AND (notifications.content_removed_by IS NULL OR notifications.content_removed_by <> 'erasure')`

/** The exact messages sent to the person: the raw MIME holds the address, the name and the content. */
export const SENT_MESSAGES_TO_ERASE = `sent_messages.notification_id IN
  (SELECT n.id FROM notifications n WHERE ${notificationsOfPerson('n')})`

/**
 * Removes the recipient snapshot (address, name, time zone, pseudonym),
 * subject, bodies, unsubscribe link and template model of the person's
 * notifications; ids, kind, status, delivery status and times stay, so stories
 * and counts still hold, and `content_removed_by = 'erasure'` says why the rest
 * is gone. A notification that was still to be sent — pending, sending,
 * paused, awaiting its contact, or of unknown outcome — ends `undeliverable`:
 * there is no one left to send it to. A final one keeps its status and its
 * reason, unless the reason (a provider's words) names an address of the
 * person. Run after the statements that find rows through the snapshot.
 */
export function eraseNotifications(db: D1Database, parameters: ErasureParameters): D1PreparedStatement {
  return bindErasure(
    db,
    `UPDATE notifications SET ${erasedContent('?4', '?2')} WHERE ${NOTIFICATIONS_TO_ERASE}`,
    parameters,
  )
}

/**
 * What an erasure does to a notification (`eraseNotifications`): SQL for its
 * `SET` list, over the parameters of now and of the JSON array of the
 * person's addresses (a provider's words that name one go).
 */
function erasedContent(now: string, addresses: string): string {
  return `status = CASE WHEN ${finalStatusSql()} THEN status ELSE 'undeliverable' END,
       status_reason = CASE
         WHEN NOT ${finalStatusSql()} THEN 'the recipient was erased before it was sent'
         WHEN EXISTS (SELECT 1 FROM json_each(${addresses}) a WHERE instr(lower(status_reason), a.value) > 0)
           THEN 'the recipient was erased'
         ELSE status_reason END,
       updated_at = CASE WHEN ${finalStatusSql()} THEN updated_at ELSE ${now} END,
       lease_until = NULL,
       recipient_email = NULL, recipient_name = NULL, time_zone = NULL, recipient_hash = NULL,
       subject = NULL, text_body = NULL, html_body = NULL, unsubscribe_url = NULL, model = NULL,
       content_removed_at = ${now}, content_removed_by = 'erasure'`
}

/**
 * An event that was on its way when its recipient was erased — received
 * before the erasure, written after it — is out of the erasure's reach, and
 * would write the address back and email it. So each event's write ends with
 * this: its notifications (and a digest this write opened for them alone) whose
 * address or recipient was erased at or after `receivedAt` (`erased_addresses`,
 * by pseudonym) are erased as they are written — nothing kept, nothing sent.
 * An event received after the erasure is new data, and goes as any.
 * Parameters: JSON array of the event's recipients' address pseudonyms, received at,
 * event id, now, JSON array of [user id, its pseudonym] of its recipients.
 */
export function eraseLateArrivals(
  db: D1Database,
  pseudonyms: readonly string[],
  receivedAt: string,
  eventId: string,
  now: string,
  users: readonly (readonly [string, string])[],
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET ${erasedContent('?4', "'[]'")}
       WHERE (event_id = ?3 OR (is_digest = 1 AND created_at = ?4
                                AND id IN (SELECT digest_id FROM notifications WHERE event_id = ?3)))
         AND (recipient_hash IN (SELECT pseudonym FROM erased_addresses
                                 WHERE erased_at >= ?2 AND pseudonym IN (SELECT value FROM json_each(?1)))
              OR recipient_user_id IN (SELECT json_extract(u.value, '$[0]') FROM json_each(?5) u
                                       JOIN erased_addresses e ON e.pseudonym = json_extract(u.value, '$[1]')
                                       WHERE e.erased_at >= ?2))`,
    )
    .bind(JSON.stringify(pseudonyms), receivedAt, eventId, now, JSON.stringify(users))
}
/** Deletes the exact messages sent to the person. Run before `eraseNotifications`, which clears the snapshot it matches. */
export function eraseSentMessages(db: D1Database, parameters: ErasureParameters): D1PreparedStatement {
  return bindErasure(db, `DELETE FROM sent_messages WHERE ${SENT_MESSAGES_TO_ERASE}`, parameters)
}
