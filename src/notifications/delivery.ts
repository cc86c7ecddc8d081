import type { DeliveryEvent } from '../delivery/model.ts'

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
 * A provider's event about a notification whose send outcome was unknown (a
 * lost answer through a transport without an idempotency key) proves the
 * provider took it: it is `sent`, and is not sent again. Parameters: id, event time, now.
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
         status_reason = 'the provider reported the message: the send had gone out'
       WHERE id = ?1 AND status = 'unknown'`,
    )
    .bind(notificationId, event.occurredAt, now)
}
