import { z } from '@hono/zod-openapi'
import { byColumns, rowsEverywhere } from '../../d1/shards.ts'
import { type DeadLetterSummaryRow, deadLettersOfEvent } from '../../dead-letters/reads.ts'
import { ApiError } from '../../errors.ts'
import type { ItemMarks } from '../../inbox/feed.ts'
import { LEGACY_MARKS } from '../../materialize/processed.ts'
import { type DigestReferenceRow, digestsTelling } from '../../notifications/digest-reads.ts'
import { ADMIN_ERRORS, createRouter, errors, json } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'
import { DeadLetterSummary, summaryOf } from './dead-letters.ts'
import { digestReferenceOf, InDigest } from './digest-views.ts'
import {
  Escalation,
  type NotificationRowView,
  NotificationSummary,
  notificationSummaryOf,
} from './notification-summary.ts'

const Processed = z
  .object({
    idempotencyKey: z.string(),
    contract: z.string(),
    eventType: z.string(),
    kind: z.string().nullable(),
    source: z.string(),
    origin: z.string(),
    sourceMessageId: z.string(),
    outcome: z.string(),
    traceId: z.string().nullable(),
    receivedAt: z.string(),
    processedAt: z.string(),
  })
  .openapi('ProcessedEvent')

/** Where an in-app notification's item stands in its recipient's feed. */
const InFeed = z
  .object({
    seenAt: z.string().nullable().openapi({ description: 'when the recipient saw it (null: not yet)' }),
    readAt: z.string().nullable().openapi({ description: 'when the recipient read it (null: not yet)' }),
    archivedAt: z.string().nullable().openapi({ description: 'when the recipient archived it (null: not yet)' }),
  })
  .nullable()
  .openapi({
    description:
      'a sent in-app notification’s item as its feed holds it; null for any other notification, for an item its feed no longer holds (erased, or past INBOX_RETENTION_DAYS), and for one whose feed did not answer or is past the first 100 recipients of the event',
  })

/** An escalation as the story tells it: with the mark of its item and which came first. */
const StoryEscalation = Escalation.unwrap()
  .extend({
    markedAt: z.string().nullable().openapi({
      description:
        'when the item took the mark that spares the email (seen or read), as its feed holds it; null: not yet',
    }),
    first: z.enum(['mark', 'email']).nullable().openapi({
      description:
        '`mark`: the item was marked before the feed decided, and no email went; `email`: the feed decided the email goes before any mark (a mark after it, even while the email is sent, takes nothing back); null while the email waits',
    }),
  })
  .nullable()

/**
 * A notification of the story; one told in a digest names the digest, whose
 * email is the one it went out in; a sent in-app one, when its recipient saw,
 * read and archived its item; an escalated email, its item's mark and which
 * came first.
 */
const StoryNotification = NotificationSummary.extend({
  inDigest: InDigest,
  inFeed: InFeed,
  escalation: StoryEscalation,
}).openapi('StoryNotification')

const EventStory = z
  .object({
    eventId: z.string(),
    processed: z.array(Processed),
    notifications: z.array(StoryNotification),
    deadLetters: z.array(DeadLetterSummary),
  })
  .openapi('EventStory')

const show = operatorRoute('viewer', {
  method: 'get',
  path: '/{eventId}',
  summary: 'The whole story of one event',
  description:
    'Where it came from, its outcome and idempotency key, its notifications with statuses and times — a `digested` one with the digest it went into, and that digest’s status, size, close or send time and email; a sent `in-app` one with when its recipient saw, read and archived its item (`inFeed`) — and its dead letters. The event id is the ArtHunt eventId or the PIN message-id.',
  request: {
    params: z.object({
      eventId: z
        .string()
        .min(1)
        .max(200)
        .openapi({ param: { name: 'eventId', in: 'path' } }),
    }),
  },
  responses: { 200: json(EventStory, 'The event'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

/** The most recipients' feeds a story asks for its items' marks. */
const FEEDS_MAX = 100

/**
 * Where the items of an event's sent in-app notifications stand in their
 * recipients' feeds, by notification id: one call to each recipient's feed
 * (src/inbox/inbox-feed.ts), whatever the number of their notifications. An
 * item a feed no longer holds has no entry.
 */
async function feedMarksOf(env: Env, rows: readonly NotificationRowView[]): Promise<Map<string, ItemMarks>> {
  const byRecipient = new Map<string, string[]>()
  for (const row of rows) {
    if (row.channel !== 'in-app' || row.status !== 'sent') continue
    const recipient = String(row.recipient_user_id)
    byRecipient.set(recipient, [...(byRecipient.get(recipient) ?? []), row.id])
  }
  // A feed that does not answer leaves its items without marks rather than failing the story, which is what
  // an operator reads to find out what went wrong; past FEEDS_MAX recipients the rest are left too, so that a
  // story of a large audience stays within an invocation's subrequests.
  const answers = await Promise.all(
    [...byRecipient].slice(0, FEEDS_MAX).map(([userId, ids]) =>
      env.INBOX.getByName(userId)
        .marksOf(ids)
        .catch(() => []),
    ),
  )
  return new Map(answers.flat().map((marks) => [marks.id, marks]))
}

/**
 * An escalated email's escalation with its item's mark, as the feed holds it,
 * and which came first: the feed decides once, so an email spared was marked
 * first, and an email decided went first, whatever mark came after.
 */
function storyEscalation(
  summary: z.infer<typeof NotificationSummary>,
  marks: ReadonlyMap<string, ItemMarks>,
): z.infer<typeof StoryEscalation> {
  const { escalation } = summary
  if (escalation === null) return null
  const item = marks.get(escalation.inApp)
  const markedAt = (escalation.unless === 'seen' ? item?.seenAt : item?.readAt) ?? null
  const first = summary.status === 'seen-in-app' ? 'mark' : escalation.decidedAt === null ? null : 'email'
  return { ...escalation, markedAt, first }
}

/** `/v1/events`: "did Anna get the email about response X, and if not, why?" */
export const events = createRouter().openapi(show, async (c) => {
  const { eventId } = c.req.valid('param')
  // With D1 shards, the event is in every shard one of its recipients is in (and its queue dead letters in
  // the primary): each statement's rows from every shard, ordered as one database would order them.
  const [processedRows = [], notificationRows = [], deadLetterRows = [], digestRows = []] = await rowsEverywhere(
    c.env,
    (db) => [
      db
        .prepare(
          `SELECT * FROM processed_marks WHERE event_id = ?1
           UNION ALL SELECT * FROM ${LEGACY_MARKS} WHERE event_id = ?1 ORDER BY processed_at`,
        )
        .bind(eventId),
      db.prepare('SELECT * FROM notifications WHERE event_id = ?1 ORDER BY created_at, id').bind(eventId),
      deadLettersOfEvent(db, eventId),
      digestsTelling(db, { eventId }),
    ],
  )
  processedRows.sort(byColumns('processed_at'))
  notificationRows.sort(byColumns('created_at', 'id'))
  deadLetterRows.sort(byColumns('first_seen', 'id'))
  const processedMarks = processedRows as Record<string, string | null>[]
  const notificationViews = notificationRows as NotificationRowView[]
  const deadLetterViews = deadLetterRows as DeadLetterSummaryRow[]
  const digestById = new Map((digestRows as DigestReferenceRow[]).map((row) => [row.id, digestReferenceOf(row)]))
  if (processedMarks.length + notificationViews.length + deadLetterViews.length === 0) {
    throw new ApiError('NOT_FOUND', 'nothing is known about this event: not processed, no notification, no dead letter')
  }
  const marks = await feedMarksOf(c.env, notificationViews)
  return c.json(
    {
      eventId,
      processed: processedMarks.map((row) => ({
        idempotencyKey: String(row.idempotency_key),
        contract: String(row.contract),
        eventType: String(row.event_type),
        kind: row.kind ?? null,
        source: String(row.source),
        origin: String(row.origin),
        sourceMessageId: String(row.source_message_id),
        outcome: String(row.outcome),
        traceId: row.trace_id ?? null,
        receivedAt: String(row.received_at),
        processedAt: String(row.processed_at),
      })),
      notifications: notificationViews.map((row) => {
        const item = marks.get(row.id)
        const summary = notificationSummaryOf(row)
        return {
          ...summary,
          inDigest: digestById.get(row.digest_id as string) ?? null,
          inFeed: item ? { seenAt: item.seenAt, readAt: item.readAt, archivedAt: item.archivedAt } : null,
          escalation: storyEscalation(summary, marks),
        }
      }),
      deadLetters: deadLetterViews.map(summaryOf),
    },
    200,
  )
})
