/**
 * A notification as lists and event stories show it — apart from the route
 * that reads one whole, so that the digest views can build on it without an
 * import cycle.
 */
import { z } from '@hono/zod-openapi'
import { maskEmails } from '@notify-edge/contracts'
import { NOTIFICATION_STATUSES } from '../../notifications/status.ts'

/** A notification row as read from D1. */
export type NotificationRowView = Record<string, string | number | null> & { id: string }

/** A column of a row as text, or null when it is empty. */
export function textOf(row: Record<string, unknown>, key: string): string | null {
  return row[key] === null || row[key] === undefined ? null : String(row[key])
}

/** An address a status reason quotes (a provider may quote one), masked. */
export function maskedReason(row: Record<string, unknown>): string | null {
  const reason = textOf(row, 'status_reason')
  return reason === null ? null : maskEmails(reason)
}

/** An email that waits, or waited, for its in-app item. */
export const Escalation = z
  .object({
    inApp: z.string().openapi({ description: 'the in-app notification whose item decides' }),
    unless: z.enum(['seen', 'read']).openapi({ description: 'the mark on the item that spares the email' }),
    decidedAt: z.string().nullable().openapi({
      description: 'when the feed decided that the email goes, or that it does not (null: the email still waits)',
    }),
  })
  .nullable()
  .openapi({ description: 'an email that waits for its in-app item to go unseen (its kind’s escalation); else null' })

/** A notification in lists and event stories. */
export const NotificationSummary = z
  .object({
    id: z.string(),
    eventId: z.string(),
    kind: z.string(),
    channel: z.string(),
    urgency: z.string(),
    recipientUserId: z.string(),
    status: z.enum(NOTIFICATION_STATUSES),
    statusReason: z
      .string()
      .nullable()
      .openapi({ description: 'why it has its status; an address in it (a provider may quote one) is masked' }),
    deliveryStatus: z
      .enum(['delivered', 'deferred', 'bounced', 'complained', 'failed'])
      .nullable()
      .openapi({ description: 'what the provider last reported about the sent message (null: nothing yet)' }),
    deliveryAt: z.string().nullable(),
    errorCode: z.string().nullable(),
    locale: z.string().nullable(),
    scheduledAt: z.string(),
    claimedAt: z
      .string()
      .nullable()
      .openapi({ description: 'when a dispatcher last took it for sending (null: never claimed)' }),
    sentAt: z.string().nullable(),
    sendAttempts: z.number(),
    providerId: z.string().nullable(),
    transport: z
      .string()
      .nullable()
      .openapi({ description: 'the transport that sent it (`cloudflare`, `resend`); null until it is sent' }),
    escalation: Escalation,
    cancellationKey: z
      .string()
      .nullable()
      .openapi({ description: 'the key a cancellation names to withdraw it (null: none)' }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi('NotificationSummary')

/** A notification as the API shows it in lists and event stories: no address, no name, no content. */
export function notificationSummaryOf(row: NotificationRowView): z.infer<typeof NotificationSummary> {
  const text = (key: string) => textOf(row, key)
  return {
    id: row.id,
    eventId: String(row.event_id),
    kind: String(row.kind),
    channel: String(row.channel),
    urgency: String(row.urgency),
    recipientUserId: String(row.recipient_user_id),
    status: row.status as z.infer<typeof NotificationSummary>['status'],
    statusReason: maskedReason(row),
    deliveryStatus: text('delivery_status') as z.infer<typeof NotificationSummary>['deliveryStatus'],
    deliveryAt: text('delivery_at'),
    errorCode: text('error_code'),
    locale: text('locale'),
    scheduledAt: String(row.scheduled_at),
    claimedAt: text('claimed_at'),
    sentAt: text('sent_at'),
    sendAttempts: Number(row.send_attempts ?? 0),
    providerId: text('provider_id'),
    transport: text('transport'),
    escalation:
      row.escalation_of === null || row.escalation_of === undefined
        ? null
        : {
            inApp: String(row.escalation_of),
            unless: row.escalation_unless === 'read' ? 'read' : 'seen',
            decidedAt: text('escalated_at'),
          },
    cancellationKey: text('cancellation_key'),
    createdAt: String(row.created_at),
    updatedAt: String(row.updated_at),
  }
}
