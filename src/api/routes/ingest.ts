import { z } from '@hono/zod-openapi'
import { Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { configOf } from '../../config.ts'
import {
  INBOUND_EVENT_MAX_BYTES,
  INGEST_MAX_BYTES,
  INGEST_MAX_EVENTS,
  IngestRequestSchema,
  toFieldIssues,
  utf8Length,
} from '../../contracts/index.ts'
import { ApiError, type FieldIssue } from '../../errors.ts'
import { loggerFor } from '../../log.ts'
import { eventQueues, sendEvents } from '../../queue/event-queues.ts'
import { requireIngest } from '../auth.ts'
import { errors, json } from '../openapi.ts'
import { SECURITY_OF } from '../roles.ts'

/** The OpenAPI description of `POST /v1/ingest` (the route validates its body itself: its size before parsing it). */
export const ingestDoc = {
  method: 'post' as const,
  path: '/v1/ingest',
  summary: 'Accept events from the bridge onto notify-events',
  description: '1–100 events, at most 256 KB; 202 only after every event is on the queue.',
  security: SECURITY_OF.ingest,
  request: { body: { content: { 'application/json': { schema: IngestRequestSchema } } } },
  responses: {
    202: json(z.object({ accepted: z.number().int() }), 'Accepted: every event is on the queue'),
    ...errors(400, 401, 403, 413, 500, 503),
  },
}

/**
 * `POST /v1/ingest`: the bridge's only way in, with the ingest token. Validates the wire
 * format (not the event contracts: an event that breaks its contract must
 * become a dead letter, not a refused request) and answers `202 {accepted}`
 * only after every event is on `notify-events`.
 */
export const ingest = new Hono<{ Bindings: Env }>().post(
  '/',
  requireIngest(),
  bodyLimit({
    maxSize: INGEST_MAX_BYTES,
    onError: () => {
      throw new ApiError('PAYLOAD_TOO_LARGE', `request body exceeds ${INGEST_MAX_BYTES} bytes`)
    },
  }),
  async (c) => {
    const text = await c.req.text()
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      throw new ApiError('INVALID_JSON', `request body is not JSON: ${(error as Error).message}`)
    }
    const parsed = IngestRequestSchema.safeParse(json)
    if (!parsed.success) {
      throw new ApiError(
        'INVALID_REQUEST',
        'the request does not match {events: InboundEvent[]}',
        toFieldIssues(parsed.error),
      )
    }
    const { events } = parsed.data
    if (events.length === 0 || events.length > INGEST_MAX_EVENTS) {
      throw new ApiError('INVALID_REQUEST', `send 1 to ${INGEST_MAX_EVENTS} events per request, not ${events.length}`, [
        { field: 'events', message: `expected 1 to ${INGEST_MAX_EVENTS} events, got ${events.length}` },
      ])
    }
    const oversized: FieldIssue[] = []
    events.forEach((event, index) => {
      const size = utf8Length(JSON.stringify(event))
      if (size > INBOUND_EVENT_MAX_BYTES) {
        oversized.push({
          index,
          field: `events[${index}]`,
          message: `event is ${size} bytes; one queue message holds at most ${INBOUND_EVENT_MAX_BYTES}: send a payload-too-large marker instead`,
        })
      }
    })
    if (oversized.length > 0)
      throw new ApiError('PAYLOAD_TOO_LARGE', 'an event is too large for a queue message', oversized)
    // Outside the try: a shard the configuration counts but the Worker lacks is its error, not the queue's.
    const queues = eventQueues(c.env, configOf(c.env).EVENTS_QUEUE_SHARDS)
    try {
      await sendEvents(queues, events)
    } catch (error) {
      loggerFor(c.env).error('ingest.queue-failed', { events: events.length, error })
      throw new ApiError(
        'QUEUE_UNAVAILABLE',
        'notify-events did not take the whole batch; send it again: what was already queued is told once',
      )
    }
    return c.json({ accepted: events.length }, 202)
  },
)
