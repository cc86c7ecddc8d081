/**
 * The statuses of a notification, in the order a notification usually meets
 * them (docs/architecture.md says what each means). The D1 CHECK constraint,
 * the API's enum and the console's filter are all this list.
 */
export const NOTIFICATION_STATUSES = [
  'pending',
  'sending',
  'sent',
  'failed',
  'undeliverable',
  'superseded',
  'suppressed',
  'opted-out',
  'paused',
  'awaiting-contact',
  'unknown',
  'collecting',
  'closing',
  'digested',
  'throttled',
  'escalating',
  'seen-in-app',
  'cancelled',
] as const

/** A notification's status. */
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number]

/** Whether a string is a notification status. */
export function isNotificationStatus(value: unknown): value is NotificationStatus {
  return (NOTIFICATION_STATUSES as readonly unknown[]).includes(value)
}

/**
 * The statuses nothing moves a notification out of by itself: retention may
 * remove their content, then delete their row, each counted from the
 * notification's last change. The others — pending, sending, paused,
 * awaiting-contact, unknown, collecting, closing, escalating — still have a
 * send, a wait, a settlement, a digest's close or an escalation ahead and are
 * kept whole. (A
 * digested notification's model is what its digest renders: once the digest
 * is closed, retention may take it.) (A `failed` one goes back to `pending` only by
 * an operator's replay, which refuses once its content or its row is gone.)
 */
export const FINAL_STATUSES = [
  'sent',
  'failed',
  'undeliverable',
  'superseded',
  'suppressed',
  'opted-out',
  'digested',
  'throttled',
  'seen-in-app',
  'cancelled',
] as const satisfies readonly NotificationStatus[]

/**
 * The statuses a notification waits in — for a send, a retry's settlement, a
 * contact, a paused transport, a digest's close or an in-app item's mark: every status but the
 * final ones. The overview counts what waits in each now.
 */
export const WAITING_STATUSES: readonly NotificationStatus[] = NOTIFICATION_STATUSES.filter(
  (status) => !(FINAL_STATUSES as readonly string[]).includes(status),
)
