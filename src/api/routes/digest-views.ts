/**
 * Digests as the operator API shows them: on a digested notification (in its
 * event's story and on its own page), the digest it went into and that
 * digest's email; on a digest's own page, the events it tells. Like every
 * summary, no address, name or content: the digest's own page masks those as
 * for any notification.
 */
import { z } from '@hono/zod-openapi'
import type { DigestEventRow, DigestReferenceRow } from '../../notifications/digest-reads.ts'
import { maskedReason, type NotificationRowView, NotificationSummary } from './notification-summary.ts'

/** How many of a digest's events its page lists (its email lists fewer: DIGEST_MAX_ITEMS); `size` counts all. */
export const DIGEST_EVENTS_LISTED = 500

/** The ids of a sent message while retention keeps it (`SENT_MESSAGE_RETENTION_DAYS`). */
export const SentMessageIds = z.object({
  transport: z.string(),
  messageId: z.string().openapi({ description: 'the Message-ID header the message went out with' }),
  sentAt: z.string(),
})

const size = z.number().int().openapi({
  description: 'how many notifications it tells: so far while it collects, then as its email told them',
})
const closesAt = z.string().nullable().openapi({
  description:
    'while it collects (or is being closed): when it closes; null once closed (scheduledAt is then when it is sent)',
})

/** The digest a notification went into, and its email. */
const DigestReference = NotificationSummary.pick({
  id: true,
  status: true,
  statusReason: true,
  errorCode: true,
  scheduledAt: true,
  sentAt: true,
  providerId: true,
  deliveryStatus: true,
  deliveryAt: true,
})
  .extend({ size, closesAt, sentMessage: SentMessageIds.nullable() })
  .openapi('DigestReference', {
    description:
      'the digest a `digested` notification went into: its email is the one that told it (id: the digest’s notification)',
  })

/** The `inDigest` of a notification: null unless it is `digested`. */
export const InDigest = DigestReference.nullable().openapi({
  description: 'a `digested` notification: the digest it went into',
})

/** The events a digest tells, on its own page. */
export const DigestEvents = z
  .object({
    size,
    closesAt,
    events: z
      .array(z.object({ eventId: z.string(), notificationId: z.string(), kind: z.string(), createdAt: z.string() }))
      .openapi({ description: `oldest first, as its email lists them; at most ${DIGEST_EVENTS_LISTED}` }),
  })
  .openapi('DigestEvents')

type Status = z.infer<typeof NotificationSummary>['status']

/** A digest's close, while it is still ahead or running: after it, `scheduled_at` is the send's time. */
function closesAtOf(status: string, scheduledAt: string): string | null {
  return status === 'collecting' || status === 'closing' ? scheduledAt : null
}

/** A digest row read by `digestsTelling`, as the API shows it. */
export function digestReferenceOf(row: DigestReferenceRow): z.infer<typeof DigestReference> {
  return {
    id: row.id,
    status: row.status as Status,
    statusReason: maskedReason(row),
    errorCode: row.error_code,
    scheduledAt: row.scheduled_at,
    sentAt: row.sent_at,
    providerId: row.provider_id,
    deliveryStatus: row.delivery_status as z.infer<typeof DigestReference>['deliveryStatus'],
    deliveryAt: row.delivery_at,
    size: Number(row.size),
    closesAt: closesAtOf(row.status, row.scheduled_at),
    sentMessage:
      row.transport && row.message_id
        ? { transport: row.transport, messageId: row.message_id, sentAt: String(row.message_sent_at) }
        : null,
  }
}

/** A digest's events (rows of `eventsOfDigest`), or null for a notification that is not a digest. */
export function digestEventsOf(
  digest: NotificationRowView,
  rows: readonly DigestEventRow[],
): z.infer<typeof DigestEvents> | null {
  if (Number(digest.is_digest) !== 1) return null
  return {
    size: digest.digest_size === null ? Number(rows[0]?.total ?? 0) : Number(digest.digest_size),
    closesAt: closesAtOf(String(digest.status), String(digest.scheduled_at)),
    events: rows.map((row) => ({
      eventId: row.event_id,
      notificationId: row.id,
      kind: row.kind,
      createdAt: row.created_at,
    })),
  }
}
