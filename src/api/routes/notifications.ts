import { z } from '@hono/zod-openapi'
import { maskEmails } from '@notify-edge/contracts'
import { shardDbOfId } from '../../d1/shards.ts'
import { timelineOf } from '../../delivery/delivery-event-store.ts'
import { ApiError } from '../../errors.ts'
import {
  type DigestEventRow,
  type DigestReferenceRow,
  digestsTelling,
  eventsOfDigest,
} from '../../notifications/digest-reads.ts'
import { maskUnsubscribeTokens, maskUnsubscribeTokensInMime } from '../../preferences/mask.ts'
import { maskAddress, maskName } from '../../privacy.ts'
import { recordRead } from '../audited.ts'
import { ADMIN_ERRORS, createRouter, errors, json } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'
import {
  DIGEST_EVENTS_LISTED,
  DigestEvents,
  digestEventsOf,
  digestReferenceOf,
  InDigest,
  SentMessageIds,
} from './digest-views.ts'
import { type NotificationRowView, NotificationSummary, notificationSummaryOf, textOf } from './notification-summary.ts'

/** What a read of one notification may reveal, as the answer's `revealed` and its audit row name them. */
const REVEALABLE = [
  'recipientEmail',
  'recipientName',
  'statusReason',
  'subject',
  'text',
  'html',
  'unsubscribeUrl',
  'timeline',
  'raw',
] as const
type Revealable = (typeof REVEALABLE)[number]

const Notification = NotificationSummary.extend({
  recipientEmail: z
    .string()
    .nullable()
    .openapi({ description: 'masked (`a***@example.com`) unless revealed', example: 'a***@example.com' }),
  recipientName: z.string().nullable().openapi({ description: 'masked (its first letter) unless revealed' }),
  timeZone: z.string().nullable(),
  subject: z.string().nullable().openapi({ description: 'null unless revealed' }),
  text: z.string().nullable().openapi({ description: 'null unless revealed' }),
  html: z.string().nullable().openapi({ description: 'null unless revealed (`reveal=true` or `reveal=html`)' }),
  templateVersion: z.number().nullable(),
  traceId: z.string().nullable(),
  unsubscribeUrl: z.string().nullable().openapi({
    description:
      'the one-click link of an optional kind; its token reads `[token]` except in what an admin reveals (a viewer never gets one: it would let them write)',
  }),
  revealed: z.array(z.enum(REVEALABLE)).openapi({
    description: 'what this answer shows unmasked; empty by default. Each non-empty answer is one audit row.',
  }),
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
        detail: z.record(z.string(), z.unknown()).openapi({ description: 'addresses masked unless revealed' }),
      }),
    )
    .openapi({ description: 'the provider events about the sent message, oldest first' }),
  sentMessage: SentMessageIds.extend({
    raw: z.string().optional().openapi({
      description: 'the exact message sent (`raw=true`); unsubscribe tokens masked for a viewer',
    }),
  }).nullable(),
  inDigest: InDigest,
  digest: DigestEvents.nullable().openapi({ description: 'a digest: the events it tells (null for any other)' }),
}).openapi('Notification')

const show = operatorRoute('viewer', {
  method: 'get',
  path: '/{id}',
  summary: 'One notification: status, what was sent, and — revealed on request, audited — its recipient and content',
  description:
    "By default, for every role, the address and name are masked, the content (subject, text, HTML) is null and the unsubscribe token reads `[token]`: such a read is not audited. `reveal=true` shows the recipient, the content and the provider events unmasked; `reveal=html` the HTML part alone (the console's email frame); `raw=true` adds the raw MIME to what `reveal=true` shows. Each unmasked read writes one audit row (`notification.reveal`, `notification.html`, `notification.raw`) naming the operator, the notification and what was revealed, before it is answered. Only an admin gets the real unsubscribe link: a viewer's token stays masked everywhere, raw MIME included. A digest is read the same way, and lists the events it tells (`digest`); a `digested` notification names the digest it went into (`inDigest`).",
  request: {
    params: z.object({
      id: z
        .string()
        .min(1)
        .max(100)
        .openapi({ param: { name: 'id', in: 'path' } }),
    }),
    query: z.object({
      reveal: z.enum(['false', 'true', 'html']).default('false').openapi({
        description:
          '`true`: the recipient, the content and the provider events unmasked; `html`: the HTML part alone. Audited.',
      }),
      raw: z
        .enum(['true', 'false'])
        .default('false')
        .openapi({ description: 'include the raw MIME (and all that `reveal=true` shows). Audited.' }),
    }),
  },
  responses: { 200: json(Notification, 'The notification'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

type SentRow = { transport: string; message_id: string; raw: string; sent_at: string }

/** The audit action of each kind of unmasked read. */
const READ_ACTIONS = { all: 'notification.reveal', html: 'notification.html', raw: 'notification.raw' } as const

/** Every address in the strings of a provider event's detail masked (an SMTP answer may quote the recipient). */
function maskedDetail(detail: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(maskEmails(JSON.stringify(detail))) as Record<string, unknown>
}

/** `/v1/notifications`. */
export const notifications = createRouter().openapi(show, async (c) => {
  const { id } = c.req.valid('param')
  const query = c.req.valid('query')
  const read: keyof typeof READ_ACTIONS | 'none' =
    query.raw === 'true' ? 'raw' : query.reveal === 'true' ? 'all' : query.reveal === 'html' ? 'html' : 'none'
  // The shard its id names (src/d1/shards.ts); the audit of a read is the primary's.
  const db = shardDbOfId(c.env, id)
  const [found, sent, told, inDigest] = await db.batch([
    db.prepare('SELECT * FROM notifications WHERE id = ?1').bind(id),
    db.prepare('SELECT transport, message_id, raw, sent_at FROM sent_messages WHERE notification_id = ?1').bind(id),
    eventsOfDigest(db, id, DIGEST_EVENTS_LISTED),
    digestsTelling(db, { notificationId: id }),
  ])
  const row = found?.results?.[0] as NotificationRowView | undefined
  if (!row) throw new ApiError('NOT_FOUND', 'no such notification')
  const message = sent?.results?.[0] as SentRow | undefined
  const digestRow = inDigest?.results?.[0] as DigestReferenceRow | undefined
  const text = (key: string) => textOf(row, key)
  const whole = read === 'all' || read === 'raw'
  const link = text('unsubscribe_url')
  // The one-click link is a capability (a POST with it opts the recipient out): only an admin's
  // unmasked read carries it; a viewer, who may change nothing, never gets it, even revealed.
  const linkShown = read !== 'none' && c.get('operator').role === 'admin'
  const withLink = (value: string | null) => (value === null || linkShown ? value : maskUnsubscribeTokens(value))
  const timeline = await timelineOf(db, id)
  const revealed: Revealable[] = [
    ...(whole ? (['recipientEmail', 'recipientName', 'statusReason', 'subject', 'text'] as const) : []),
    ...(read !== 'none' ? (['html'] as const) : []),
    ...(linkShown && link !== null ? (['unsubscribeUrl'] as const) : []),
    ...(whole ? (['timeline'] as const) : []),
    ...(read === 'raw' && message ? (['raw'] as const) : []),
  ]
  if (read !== 'none') {
    // Written before the answer: a read whose row cannot be written fails instead of going unrecorded.
    // What was revealed is named; the address itself never enters the trail.
    await recordRead(c, { action: READ_ACTIONS[read], target: id, parameters: { revealed } })
  }
  return c.json(
    {
      ...notificationSummaryOf(row),
      ...(whole ? { statusReason: text('status_reason') } : {}),
      recipientEmail: whole ? text('recipient_email') : maskAddress(text('recipient_email')) || null,
      recipientName: whole ? text('recipient_name') : maskName(text('recipient_name')) || null,
      timeZone: text('time_zone'),
      subject: whole ? withLink(text('subject')) : null,
      text: whole ? withLink(text('text_body')) : null,
      html: read === 'none' ? null : withLink(text('html_body')),
      templateVersion: row.template_version === null ? null : Number(row.template_version),
      traceId: text('trace_id'),
      unsubscribeUrl: link === null || linkShown ? link : maskUnsubscribeTokens(link),
      revealed,
      timeline: whole ? timeline : timeline.map((event) => ({ ...event, detail: maskedDetail(event.detail) })),
      contentRemoved:
        row.content_removed_at === null || row.content_removed_at === undefined
          ? null
          : { at: String(row.content_removed_at), by: row.content_removed_by as 'retention' | 'erasure' },
      sentMessage: message
        ? {
            transport: message.transport,
            messageId: message.message_id,
            sentAt: message.sent_at,
            ...(read === 'raw' ? { raw: linkShown ? message.raw : maskUnsubscribeTokensInMime(message.raw) } : {}),
          }
        : null,
      inDigest: digestRow ? digestReferenceOf(digestRow) : null,
      digest: digestEventsOf(row, (told?.results ?? []) as DigestEventRow[]),
    },
    200,
  )
})
