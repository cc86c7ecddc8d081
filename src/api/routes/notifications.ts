import { createRoute, z } from '@hono/zod-openapi'
import { timelineOf } from '../../delivery/store.ts'
import { ApiError } from '../../errors.ts'
import { NOTIFICATION_STATUSES } from '../../notifications/status.ts'
import { ADMIN_ERRORS, ADMIN_SECURITY, createRouter, errors, json } from '../openapi.ts'

/** A notification row as read from D1. */
export type NotificationRowView = Record<string, string | number | null> & { id: string }

export const NotificationSummary = z
  .object({
    id: z.string(),
    eventId: z.string(),
    kind: z.string(),
    channel: z.string(),
    urgency: z.string(),
    recipientUserId: z.string(),
    status: z.enum(NOTIFICATION_STATUSES),
    statusReason: z.string().nullable(),
    deliveryStatus: z
      .enum(['delivered', 'deferred', 'bounced', 'complained', 'failed'])
      .nullable()
      .openapi({ description: 'what the provider last reported about the sent message (null: nothing yet)' }),
    deliveryAt: z.string().nullable(),
    errorCode: z.string().nullable(),
    locale: z.string().nullable(),
    scheduledAt: z.string(),
    sentAt: z.string().nullable(),
    sendAttempts: z.number(),
    providerId: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi('NotificationSummary')

/** A notification as the API shows it in lists (no address, no content). */
export function notificationSummaryOf(row: NotificationRowView): z.infer<typeof NotificationSummary> {
  const text = (key: string) => (row[key] === null || row[key] === undefined ? null : String(row[key]))
  return {
    id: row.id,
    eventId: String(row.event_id),
    kind: String(row.kind),
    channel: String(row.channel),
    urgency: String(row.urgency),
    recipientUserId: String(row.recipient_user_id),
    status: row.status as z.infer<typeof NotificationSummary>['status'],
    statusReason: text('status_reason'),
    deliveryStatus: text('delivery_status') as z.infer<typeof NotificationSummary>['deliveryStatus'],
    deliveryAt: text('delivery_at'),
    errorCode: text('error_code'),
    locale: text('locale'),
    scheduledAt: String(row.scheduled_at),
    sentAt: text('sent_at'),
    sendAttempts: Number(row.send_attempts ?? 0),
    providerId: text('provider_id'),
    createdAt: String(row.created_at),
    updatedAt: String(row.updated_at),
  }
}

const Notification = NotificationSummary.extend({
  recipientEmail: z.string().nullable(),
  recipientName: z.string().nullable(),
  timeZone: z.string().nullable(),
  subject: z.string().nullable(),
  text: z.string().nullable(),
  html: z.string().nullable(),
  templateVersion: z.number().nullable(),
  traceId: z.string().nullable(),
  unsubscribeUrl: z.string().nullable().openapi({ description: 'the one-click link of an optional kind' }),
  contentRemoved: z
    .object({ at: z.string(), by: z.enum(['retention', 'erasure']) })
    .nullable()
    .openapi({
      description:
        'when and why the recipient snapshot and content were removed (NOTIFICATION_CONTENT_RETENTION_DAYS, or an erasure); null while they are kept',
    }),
  timeline: z
    .array(
      z.object({
        provider: z.string(),
        providerEventId: z.string(),
        type: z.string(),
        status: z.string(),
        occurredAt: z.string(),
        receivedAt: z.string(),
        detail: z.record(z.string(), z.unknown()),
      }),
    )
    .openapi({ description: 'the provider events about the sent message, oldest first' }),
  sentMessage: z
    .object({ transport: z.string(), messageId: z.string(), sentAt: z.string(), raw: z.string().optional() })
    .nullable(),
}).openapi('Notification')

const show = createRoute({
  method: 'get',
  path: '/{id}',
  summary: 'One notification: recipient snapshot, rendered content, status, and what was sent',
  security: ADMIN_SECURITY,
  request: {
    params: z.object({
      id: z
        .string()
        .min(1)
        .max(100)
        .openapi({ param: { name: 'id', in: 'path' } }),
    }),
    query: z.object({
      raw: z.enum(['true', 'false']).default('false').openapi({ description: 'include the raw MIME' }),
    }),
  },
  responses: { 200: json(Notification, 'The notification'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

/** `/v1/notifications`. */
export const notifications = createRouter().openapi(show, async (c) => {
  const { id } = c.req.valid('param')
  const db = c.env.DB
  const [found, sent] = await db.batch([
    db.prepare('SELECT * FROM notifications WHERE id = ?1').bind(id),
    db.prepare('SELECT transport, message_id, raw, sent_at FROM sent_messages WHERE notification_id = ?1').bind(id),
  ])
  const row = found?.results?.[0] as NotificationRowView | undefined
  if (!row) throw new ApiError('NOT_FOUND', 'no such notification')
  const message = sent?.results?.[0] as
    | { transport: string; message_id: string; raw: string; sent_at: string }
    | undefined
  const text = (key: string) => (row[key] === null || row[key] === undefined ? null : String(row[key]))
  return c.json(
    {
      ...notificationSummaryOf(row),
      recipientEmail: text('recipient_email'),
      recipientName: text('recipient_name'),
      timeZone: text('time_zone'),
      subject: text('subject'),
      text: text('text_body'),
      html: text('html_body'),
      templateVersion: row.template_version === null ? null : Number(row.template_version),
      traceId: text('trace_id'),
      unsubscribeUrl: text('unsubscribe_url'),
      contentRemoved:
        row.content_removed_at === null || row.content_removed_at === undefined
          ? null
          : { at: String(row.content_removed_at), by: row.content_removed_by as 'retention' | 'erasure' },
      timeline: await timelineOf(db, id),
      sentMessage: message
        ? {
            transport: message.transport,
            messageId: message.message_id,
            sentAt: message.sent_at,
            ...(c.req.valid('query').raw === 'true' ? { raw: message.raw } : {}),
          }
        : null,
    },
    200,
  )
})
