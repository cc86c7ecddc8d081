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
] as const

/** A notification's status. */
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number]

/** Whether a string is a notification status. */
export function isNotificationStatus(value: unknown): value is NotificationStatus {
  return (NOTIFICATION_STATUSES as readonly unknown[]).includes(value)
}
