import type { DeliveryEvent } from '../delivery/model.ts'
import { mayHaveGoneOut } from './sql.ts'

/**
 * Sets a notification's delivery status unless a later event set it already:
 * providers do not promise order, and a `deferred` that arrives after the
 * `delivered` it preceded must not win. Parameters: id, status, event time, now.
 */
export function applyDeliveryStatus(
  db: D1Database,
  notificationId: string,
  event: DeliveryEvent,
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET delivery_status = ?2, delivery_at = ?3, updated_at = ?4
       WHERE id = ?1 AND (delivery_at IS NULL OR delivery_at <= ?3)`,
    )
    .bind(notificationId, event.status, event.occurredAt, now)
}

/**
 * A provider's event about a notification that may have gone out proves the
 * provider took it: it is `sent`, and is not sent again — whether it waits
 * `unknown` (a lost answer through a transport without a key), or went back
 * to `pending` or `paused` for a retry after a lost answer (the retry would
 * only be answered, or, past the provider's window or without a key, be a
 * second email). Its provider id is kept when it had none (the lost answer
 * never said it). Parameters: id, event time, now, provider message id.
 */
export function settleUnknownOutcome(
  db: D1Database,
  notificationId: string,
  event: DeliveryEvent,
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'sent', sent_at = min(?2, ?3), updated_at = ?3, error_code = NULL,
         provider_id = coalesce(provider_id, ?4), lease_until = NULL,
         status_reason = 'the provider reported the message: the send had gone out'
       WHERE id = ?1 AND (status = 'unknown' OR (status IN ('pending', 'paused') AND ${mayHaveGoneOut('notifications')}))`,
    )
    .bind(notificationId, event.occurredAt, now, event.providerMessageId)
}
