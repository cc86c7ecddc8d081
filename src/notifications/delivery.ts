import { mayHaveGoneOut } from './sql.ts'

/**
 * Sets a notification's delivery status unless a later event set it already:
 * providers do not promise order, and a `deferred` that arrives after the
 * `delivered` it preceded must not win. Parameters: id, the delivery status, event time, now.
 */
export function applyDeliveryStatus(
  db: D1Database,
  notificationId: string,
  status: string,
  occurredAt: string,
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET delivery_status = ?2, delivery_at = ?3, updated_at = ?4
       WHERE id = ?1 AND (delivery_at IS NULL OR delivery_at <= ?3)`,
    )
    .bind(notificationId, status, occurredAt, now)
}

/**
 * A provider's event about a notification that may have gone out proves the
 * provider took it: it is `sent`, and is not sent again — whether it waits
 * `unknown` (a lost answer through a transport without a key), or went back
 * to `pending` or `paused` for a retry after a lost answer (the retry would
 * only be answered, or, past the provider's window or without a key, be a
 * second email), or failed because no event had come in time
 * (NTF_SEND_UNKNOWN: its dead letter goes, `discardSettled`), or waited for this provider's
 * events and was just freed to go through the next transport, not yet claimed
 * (`failover_from`: an event late by a moment still stops the second send). Its provider id is kept when it had none (the lost answer
 * never said it), and so is its transport: the provider that reported it.
 * Parameters: id, event time, now, provider message id, provider.
 */
export function settleUnknownOutcome(
  db: D1Database,
  notificationId: string,
  occurredAt: string,
  now: string,
  providerMessageId: string,
  provider: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'sent', sent_at = min(?2, ?3), updated_at = ?3, error_code = NULL,
         provider_id = coalesce(provider_id, ?4), transport = coalesce(transport, ?5), lease_until = NULL,
         status_reason = 'the provider reported the message: the send had gone out'
       WHERE id = ?1 AND (status = 'unknown' OR (status IN ('pending', 'paused') AND ${mayHaveGoneOut('notifications')})
                          OR (status = 'failed' AND error_code = 'NTF_SEND_UNKNOWN')
                          OR (status = 'pending' AND failover_from = ?5))`,
    )
    .bind(notificationId, occurredAt, now, providerMessageId, provider)
}

/**
 * The open dead letter of a notification a delivery event just settled as
 * sent (`settleUnknownOutcome`, before it in the same D1 batch): discarded,
 * so that a replay does not send it again. Parameters: notification id, now.
 */
export function discardSettled(db: D1Database, notificationId: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE dead_letters SET status = 'discarded', resolved_at = ?2,
         discard_reason = 'a delivery event showed the send had gone out'
       WHERE queue = 'notify-dispatch' AND status = 'open' AND code = 'NTF_SEND_UNKNOWN'
         AND json_extract(body, '$.notificationId') = ?1
         AND EXISTS (SELECT 1 FROM notifications WHERE id = ?1 AND status = 'sent' AND updated_at = ?2)`,
    )
    .bind(notificationId, now)
}
