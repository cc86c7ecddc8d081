import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import type { InboundEvent } from '../src/contracts/index.ts'
import { deliver, deliverBatch, freshInbound, guid, postIngest, refuseInserts, seedContact } from './helpers.ts'
import { allRows } from './shards.ts'

type DeadLetter = {
  body: string
  id: string
  queue: string
  code: string
  error: string
  attempts: number | null
  event_id: string
  status: string
  failures: number
  history: string
}

async function deadLettersOf(eventId: string, count = 1): Promise<DeadLetter[]> {
  return vi.waitFor(
    async () => {
      const results = await allRows<DeadLetter>('SELECT * FROM dead_letters WHERE event_id = ?', eventId)
      expect(results).toHaveLength(count)
      return results
    },
    { timeout: 20_000, interval: 100 },
  )
}

/** How many shards marked the event processed (one, in one database). */
async function processedCount(eventId: string): Promise<number> {
  const counts = await allRows<{ n: number }>('SELECT count(*) AS n FROM processed_marks WHERE event_id = ?', eventId)
  return counts.reduce((sum, row) => sum + row.n, 0)
}

/** A real D1 failure confined to one event: a trigger that aborts its insert. */
function breakD1For(eventId: string): Promise<() => Promise<void>> {
  return refuseInserts('processed_marks', `NEW.event_id = '${eventId}'`, `injected D1 failure for ${eventId}`)
}

function eventIdOf(event: InboundEvent): string {
  return JSON.parse(event.body).envelope.eventId
}

describe('notify-events consumer', () => {
  it('retries a failing message after 5 s, then 30 s, and leaves no dead letter when it then succeeds', async () => {
    const event = freshInbound('response.created')
    const eventId = eventIdOf(event)
    const repair = await breakD1For(eventId)
    const id = `msg-${guid()}`

    const first = await deliver(event, 1, id)
    expect(first.retryMessages).toEqual([{ msgId: id, delaySeconds: 5 }])
    expect(first.explicitAcks).toEqual([])
    const second = await deliver(event, 2, id)
    expect(second.retryMessages).toEqual([{ msgId: id, delaySeconds: 30 }])

    await repair()
    const third = await deliver(event, 3, id)
    expect(third.explicitAcks).toEqual([id])
    expect(third.retryMessages).toEqual([])
    expect(await processedCount(eventId)).toBe(1)
    const { results } = await env.DB.prepare('SELECT id FROM dead_letters WHERE event_id = ?').bind(eventId).all()
    expect(results).toEqual([])
  })

  it('dead-letters a message that fails three times: one row with the last error', async () => {
    const event = freshInbound('invitation.created')
    const eventId = eventIdOf(event)
    const repair = await breakD1For(eventId)
    const id = `msg-${guid()}`
    expect((await deliver(event, 1, id)).retryMessages).toEqual([{ msgId: id, delaySeconds: 5 }])
    expect((await deliver(event, 2, id)).retryMessages).toEqual([{ msgId: id, delaySeconds: 30 }])
    const third = await deliver(event, 3, id)
    expect(third.explicitAcks).toEqual([id])
    expect(third.retryMessages).toEqual([])
    await repair()

    const [row] = await deadLettersOf(eventId)
    expect(row).toMatchObject({ queue: 'notify-events', code: 'NTF_DEPENDENCY_FAILED', attempts: 3, status: 'open' })
    expect(row?.error).toContain(`injected D1 failure for ${eventId}`)
    expect(await processedCount(eventId)).toBe(0)
  })

  it('dead-letters an invalid event at once, naming the field, without retrying', async () => {
    const event = freshInbound('response.created', (value) => {
      delete (value.data as { recipient: Record<string, unknown> }).recipient.email
    })
    const eventId = eventIdOf(event)
    const result = await deliver(event, 1)
    expect(result.retryMessages).toEqual([])
    expect(result.explicitAcks).toHaveLength(1)
    const [row] = await deadLettersOf(eventId)
    expect(row).toMatchObject({ code: 'NTF_INVALID_PAYLOAD', attempts: 1, queue: 'notify-events' })
    expect(row?.error).toContain('data.recipient.email')
    expect(JSON.parse(row?.body as never)).toEqual(event)
  })

  it('dead-letters a queue message that is not an InboundEvent at all', async () => {
    const id = `msg-${guid()}`
    const result = await deliver({ hello: 'world', marker: id }, 1, id)
    expect(result.explicitAcks).toEqual([id])
    await vi.waitFor(
      async () => {
        const row = await env.DB.prepare('SELECT code, error FROM dead_letters WHERE body LIKE ?')
          .bind(`%${id}%`)
          .first()
        expect(row).toMatchObject({ code: 'NTF_INVALID_PAYLOAD', error: expect.stringContaining('source') })
      },
      { timeout: 20_000, interval: 100 },
    )
  })

  it('acks an event type it does not handle (ignored-event), and a duplicate (skipped-duplicate)', async () => {
    const ignored = freshInbound('person-upserted')
    ignored.headers['event-type'] = 'person-deleted'
    const ignoredResult = await deliver(ignored, 1)
    expect(ignoredResult.explicitAcks).toHaveLength(1)
    const trace = await allRows('SELECT outcome FROM processed_marks WHERE event_id = ?', ignored.headers['message-id'])
    expect(trace).toEqual([{ outcome: 'ignored-event' }])

    const event = freshInbound('verification-request-submitted', (value) => {
      value.ReviewerUserId = guid()
    })
    await seedContact(JSON.parse(event.body).ReviewerUserId)
    const eventId = event.headers['message-id'] as string
    expect((await deliver(event, 1)).explicitAcks).toHaveLength(1)
    expect((await deliver({ ...event, sourceMessageId: 'redelivered' }, 1)).explicitAcks).toHaveLength(1)
    expect(await processedCount(eventId)).toBe(1)
  })

  it('settles each message of a mixed batch on its own', async () => {
    await seedContact('0c0e2d2a-5c71-4a3f-8a2f-7e9c1b3d4a55')
    const good = freshInbound('verification-completed')
    const bad = freshInbound('verification-completed', (value) => {
      value.UserId = 'nope'
    })
    const broken = freshInbound('response.created')
    const repair = await breakD1For(eventIdOf(broken))
    const result = await deliverBatch([
      { id: 'good', attempts: 1, body: good },
      { id: 'bad', attempts: 1, body: bad },
    ])
    expect(result.explicitAcks.sort()).toEqual(['bad', 'good'])
    await deadLettersOf(bad.headers['message-id'] as string)

    // A statement that fails for one event fails that event alone: the other is written and acked.
    const fine = freshInbound('verification-completed')
    const mixed = await deliverBatch([
      { id: 'fine', attempts: 1, body: fine },
      { id: 'broken', attempts: 1, body: broken },
    ])
    expect(mixed.retryMessages).toEqual([{ msgId: 'broken', delaySeconds: 5 }])
    expect(mixed.explicitAcks).toEqual(['fine'])
    expect(await processedCount(fine.headers['message-id'] as string)).toBe(1)
    await repair()
  })

  it('one event whose write always fails among 99 others: the 99 are written and acked at once; it alone is retried, then dead-lettered and counted', async () => {
    const events = Array.from({ length: 99 }, () => freshInbound('response.created'))
    const broken = freshInbound('invitation.created')
    const repair = await breakD1For(eventIdOf(broken))
    const deadLettered = async () => {
      // Summed over the D1 shards, as /metrics does.
      const values = await allRows<{ value: number }>(
        "SELECT value FROM counters WHERE name = 'notify_events_total' AND labels = ?1",
        JSON.stringify({ outcome: 'dead-lettered', source: 'http' }),
      )
      return values.reduce((sum, row) => sum + row.value, 0)
    }
    const before = await deadLettered()
    const messages = (attempts: number) => [
      ...events.slice(0, 50).map((body, index) => ({ id: `m${index}`, attempts, body })),
      { id: 'broken', attempts, body: broken },
      ...events.slice(50).map((body, index) => ({ id: `m${index + 50}`, attempts, body })),
    ]
    const first = await deliverBatch(messages(1))
    expect(first.retryMessages).toEqual([{ msgId: 'broken', delaySeconds: 5 }])
    expect(first.explicitAcks).toHaveLength(99)
    for (const event of events) expect(await processedCount(eventIdOf(event))).toBe(1)
    // Its last attempt: a dead letter, and the dead-lettered counter raised during the write is kept.
    const last = await deliverBatch([{ id: 'broken', attempts: 3, body: broken }])
    expect(last.explicitAcks).toEqual(['broken'])
    await deadLettersOf(eventIdOf(broken))
    expect(await deadLettered()).toBe(before + 1)
    await repair()
  })

  it('an invalid event posted to ingest ends as one NTF_INVALID_PAYLOAD dead letter', async () => {
    const event = freshInbound('response.created', (value) => {
      delete (value.data as { recipient: Record<string, unknown> }).recipient.email
    })
    const response = await postIngest({ events: [event, event] })
    expect(response.status).toBe(202)
    const [row] = await deadLettersOf(eventIdOf(event))
    expect(row).toMatchObject({ code: 'NTF_INVALID_PAYLOAD', queue: 'notify-events' })
    expect(row?.error).toContain('data.recipient.email')
  })
})
