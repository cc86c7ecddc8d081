import { createExecutionContext, createMessageBatch, getQueueResult } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import type { InboundEvent } from '../src/contracts/index.ts'
import { deadLetterEnvelope } from '../src/dead-letters/envelope.ts'
import worker from '../src/index.ts'
import { freshInbound, guid } from './helpers.ts'

type Row = {
  id: string
  queue: string
  code: string
  error: string
  attempts: number | null
  source: string
  origin: string
  event_id: string
  event_type: string
  body: string
  history: string
  failures: number
  status: string
  first_seen: string
  last_seen: string
}

/** Delivers messages to the notify-dlq consumer as Cloudflare would. */
async function deliverToDlq(bodies: unknown[]) {
  const batch = createMessageBatch(
    'notify-dlq',
    bodies.map((body) => ({ id: `dlq-${guid()}`, timestamp: new Date(), attempts: 1, body })),
  )
  const ctx = createExecutionContext()
  await worker.queue(batch, env)
  return getQueueResult(batch, ctx)
}

async function rowsOf(eventId: string): Promise<Row[]> {
  const { results } = await env.DB.prepare('SELECT * FROM dead_letters WHERE event_id = ?').bind(eventId).all<Row>()
  return results
}

/** The envelope notify-events would send for this event on its `attempts`-th delivery. */
function envelopeFor(event: InboundEvent, messageId: string, attempts: number, error: string) {
  const message = { id: messageId, attempts, body: event, timestamp: new Date() } as unknown as Message<unknown>
  return deadLetterEnvelope('notify-events', message, { code: 'NTF_DEPENDENCY_FAILED', error })
}

describe('notify-dlq consumer', () => {
  it('stores a message moved by Cloudflare after max_retries as NTF_RETRIES_EXHAUSTED', async () => {
    const event = freshInbound('verification-completed')
    const eventId = event.headers['message-id'] as string
    const result = await deliverToDlq([event])
    expect(result.explicitAcks).toHaveLength(1)
    const [row, ...rest] = await rowsOf(eventId)
    expect(rest).toEqual([])
    expect(row).toMatchObject({
      queue: 'notify-events',
      code: 'NTF_RETRIES_EXHAUSTED',
      attempts: null,
      source: event.source,
      origin: event.origin,
      event_type: 'verification-completed',
      status: 'open',
      failures: 1,
    })
    expect(JSON.parse(row?.body as string)).toEqual(event)
  })

  it('keeps one row when the same dead letter is delivered twice', async () => {
    const event = freshInbound('response.created')
    const eventId = JSON.parse(event.body).envelope.eventId
    const envelope = envelopeFor(event, 'm-1', 3, 'D1 is down')
    await deliverToDlq([envelope])
    await deliverToDlq([envelope, envelope])
    const rows = await rowsOf(eventId)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ failures: 1, attempts: 3, error: 'D1 is down' })
    expect(JSON.parse(rows[0]?.history as string)).toHaveLength(1)
  })

  it('records a later failure of the same event on its row, keeps the history, and opens it again', async () => {
    const event = freshInbound('invitation.created')
    const eventId = JSON.parse(event.body).envelope.eventId
    await deliverToDlq([envelopeFor(event, 'm-1', 3, 'first failure')])
    await env.DB.prepare("UPDATE dead_letters SET status = 'replayed' WHERE event_id = ?").bind(eventId).run()
    // The bridge re-read the event (new receivedAt); it died again on a new message.
    await deliverToDlq([
      envelopeFor({ ...event, receivedAt: new Date(Date.now() + 1000).toISOString() }, 'm-2', 3, 'second failure'),
    ])
    const [row, ...rest] = await rowsOf(eventId)
    expect(rest).toEqual([])
    expect(row).toMatchObject({ failures: 2, error: 'second failure', status: 'open' })
    expect(JSON.parse(row?.history as string)).toEqual([
      expect.objectContaining({ error: 'first failure', code: 'NTF_DEPENDENCY_FAILED', attempts: 3 }),
      expect.objectContaining({ error: 'second failure' }),
    ])
  })

  it('retries the whole batch, acking nothing, while D1 refuses the write', async () => {
    const event = freshInbound('person-upserted')
    const eventId = event.headers['message-id'] as string
    await env.DB.prepare(
      `CREATE TRIGGER fail_dlq BEFORE INSERT ON dead_letters WHEN NEW.event_id = '${eventId}'
       BEGIN SELECT RAISE(ABORT, 'injected'); END`,
    ).run()
    const other = freshInbound('person-upserted')
    const result = await deliverToDlq([event, other])
    await env.DB.prepare('DROP TRIGGER fail_dlq').run()
    expect(result.explicitAcks).toEqual([])
    expect(result.retryMessages).toHaveLength(2)
    expect(await rowsOf(eventId)).toEqual([])
    expect(await rowsOf(other.headers['message-id'] as string)).toEqual([])
  })
})
