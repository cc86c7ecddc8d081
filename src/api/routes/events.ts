import { z } from '@hono/zod-openapi'
import { byColumns, rowsEverywhere } from '../../d1/shards.ts'
import { type DeadLetterSummaryRow, deadLettersOfEvent } from '../../dead-letters/reads.ts'
import { ApiError } from '../../errors.ts'
import { LEGACY_MARKS } from '../../materialize/processed.ts'
import { type DigestReferenceRow, digestsTelling } from '../../notifications/digest-reads.ts'
import { ADMIN_ERRORS, createRouter, errors, json } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'
import { DeadLetterSummary, summaryOf } from './dead-letters.ts'
import { digestReferenceOf, InDigest } from './digest-views.ts'
import { type NotificationRowView, NotificationSummary, notificationSummaryOf } from './notification-summary.ts'

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

/** A notification of the story; one told in a digest names the digest, whose email is the one it went out in. */
const StoryNotification = NotificationSummary.extend({
  inDigest: InDigest,
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
    'Where it came from, its outcome and idempotency key, its notifications with statuses and times — a `digested` one with the digest it went into, and that digest’s status, size, close or send time and email — and its dead letters. The event id is the ArtHunt eventId or the PIN message-id.',
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
      notifications: notificationViews.map((row) => ({
        ...notificationSummaryOf(row),
        inDigest: digestById.get(row.digest_id as string) ?? null,
      })),
      deadLetters: deadLetterViews.map(summaryOf),
    },
    200,
  )
})
