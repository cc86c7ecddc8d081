import { createExecutionContext, createMessageBatch } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import type { InboundEvent } from '../src/contracts/index.ts'
import { sha256Hex } from '../src/crypto.ts'
import { DLQ_MAX_RETRIES } from '../src/dead-letters/dlq-consumer.ts'
import worker from '../src/index.ts'
import { deadLetterEnvelope } from '../src/queue/dead-letter-envelope.ts'
import wranglerToml from '../wrangler.toml?raw'
import { ADMIN_TOKEN, deliverBatch, freshInbound, guid, refuseInserts, watchQueue } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

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
  const settled = watchQueue(batch)
  const ctx = createExecutionContext()
  await worker.queue(batch, env)
  return settled(ctx)
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

/** Makes D1 refuse every dead-letter row matching `condition` (SQL over NEW); returns the repair. */
function refuseDeadLetters(condition: string): Promise<() => Promise<void>> {
  return refuseInserts('dead_letters', condition, 'string or blob too big')
}

/** notify_dead_letters_unstorable_total for notify-events dead letters of `code` with `outcome`. */
async function unstorable(outcome: 'reduced' | 'dropped', code = 'NTF_DEPENDENCY_FAILED'): Promise<number> {
  const row = await env.DB.prepare(
    "SELECT value FROM counters WHERE name = 'notify_dead_letters_unstorable_total' AND labels = ?1",
  )
    .bind(JSON.stringify({ code, outcome, queue: 'notify-events' }))
    .first<{ value: number }>()
  return row?.value ?? 0
}

function eventIdOf(event: InboundEvent): string {
  return JSON.parse(event.body).envelope.eventId
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

  it('one dead letter whose row always fails among 99: the 99 are stored and acked at once, it alone is retried, then stored reduced and counted', async () => {
    // Local D1 does not enforce D1's 2 MB value limit (a 3 MB string is stored), so a trigger stands in for a
    // rule D1 applies to one row's values: this body is refused, whatever else the batch holds.
    const token = `refused-${guid()}`
    const refuse = await refuseDeadLetters(`instr(NEW.body, '${token}') > 0`)
    const events = Array.from({ length: 99 }, () => freshInbound('response.created'))
    const bad = freshInbound('response.created', (value) => {
      ;(value.data as Record<string, unknown>).projectTitle = token
    })
    const badId = eventIdOf(bad)
    const envelopes = events.map((event, index) => envelopeFor(event, `good-${index}`, 3, 'kept'))
    const badEnvelope = envelopeFor(bad, 'bad', 3, 'the original failure')
    const before = await unstorable('reduced')
    const delivery = (attempts: number) => ({ id: 'bad', attempts, body: badEnvelope })
    try {
      const first = await deliverBatch(
        [
          ...envelopes.slice(0, 50).map((body, index) => ({ id: `good-${index}`, attempts: 1, body })),
          delivery(1),
          ...envelopes.slice(50).map((body, index) => ({ id: `good-${index + 50}`, attempts: 1, body })),
        ],
        'notify-dlq',
      )
      expect(first.explicitAcks).toHaveLength(99)
      expect(first.explicitAcks).not.toContain('bad')
      expect(first.retryMessages).toEqual([{ msgId: 'bad', delaySeconds: 30 }])
      for (const event of events) expect(await rowsOf(eventIdOf(event))).toMatchObject([{ error: 'kept' }])
      expect(await rowsOf(badId)).toEqual([])

      // Retried alone with a growing delay while its whole row may still go in.
      for (const [attempts, delaySeconds] of [
        [2, 60],
        [3, 120],
        [4, 240],
      ] as const) {
        const again = await deliverBatch([delivery(attempts)], 'notify-dlq')
        expect(again.explicitAcks).toEqual([])
        expect(again.retryMessages).toEqual([{ msgId: 'bad', delaySeconds }])
      }
      expect(await rowsOf(badId)).toEqual([])

      // Then it is stored without its body, naming why, and counted; it is not silently dropped.
      const last = await deliverBatch([delivery(5)], 'notify-dlq')
      expect(last.explicitAcks).toEqual(['bad'])
      const [row, ...rest] = await rowsOf(badId)
      expect(rest).toEqual([])
      expect(row).toMatchObject({ code: 'NTF_DEPENDENCY_FAILED', status: 'open', source: 'http', origin: bad.origin })
      expect(row?.error).toContain('the original failure')
      expect(row?.error).toContain('stored without its body')
      const original = JSON.stringify(bad)
      expect(JSON.parse(row?.body as string)).toEqual({
        notifyEdgeReduced: 1,
        cause: expect.stringContaining('string or blob too big'),
        bytes: new TextEncoder().encode(original).byteLength,
        sha256: await sha256Hex(original),
      })
      expect(await unstorable('reduced')).toBe(before + 1)
      const metrics = await fetchWorker('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      expect(await metrics.text()).toContain(
        `notify_dead_letters_unstorable_total{queue="notify-events",code="NTF_DEPENDENCY_FAILED",outcome="reduced"} ${before + 1}`,
      )

      // Its body is gone, so a replay cannot send it: refused, naming why.
      const replay = await fetchWorker(`/v1/dead-letters/${row?.id}/replay`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      })
      expect(replay.status).toBe(409)
      expect(((await replay.json()) as { error: { message: string } }).error.message).toContain('origin')
    } finally {
      await refuse()
    }
  })

  it('retries every message, acking and reducing nothing, while D1 refuses every write of the batch', async () => {
    const events = [freshInbound('person-upserted'), freshInbound('person-upserted')]
    const ids = events.map((event) => event.headers['message-id'] as string)
    const refuse = await refuseDeadLetters(`NEW.event_id IN ('${ids.join("', '")}')`)
    try {
      for (const attempts of [1, 5, 50]) {
        const result = await deliverBatch(
          events.map((body, index) => ({ id: `outage-${index}`, attempts, body })),
          'notify-dlq',
        )
        expect(result.explicitAcks).toEqual([])
        expect(result.retryMessages.map((retry) => retry.msgId)).toEqual(['outage-0', 'outage-1'])
      }
      for (const id of ids) expect(await rowsOf(id)).toEqual([])
    } finally {
      await refuse()
    }
  })

  it('a dead letter that cannot be stored even reduced is counted as dropped on its last delivery', async () => {
    const event = freshInbound('person-upserted')
    const id = event.headers['message-id'] as string
    const refuse = await refuseDeadLetters(`NEW.event_id = '${id}'`)
    const before = await unstorable('dropped', 'NTF_RETRIES_EXHAUSTED')
    try {
      const beforeLast = await deliverBatch([{ id: 'doomed', attempts: 100, body: event }], 'notify-dlq')
      expect(beforeLast.retryMessages).toEqual([{ msgId: 'doomed', delaySeconds: 3600 }])
      expect(await unstorable('dropped', 'NTF_RETRIES_EXHAUSTED')).toBe(before)
      // notify-dlq's max_retries is 100: Cloudflare drops the message after its 101st delivery.
      const last = await deliverBatch([{ id: 'doomed', attempts: 101, body: event }], 'notify-dlq')
      expect(last.explicitAcks).toEqual([])
      expect(await unstorable('dropped', 'NTF_RETRIES_EXHAUSTED')).toBe(before + 1)
      expect(await rowsOf(id)).toEqual([])
    } finally {
      await refuse()
    }
  })

  it("the consumer's last delivery is the one wrangler.toml's max_retries for notify-dlq allows", () => {
    const section = /\[\[queues\.consumers\]\]\s*queue = "notify-dlq"([\s\S]*?)(?:\n\[|$)/.exec(wranglerToml)?.[1]
    expect(Number(/max_retries = (\d+)/.exec(section ?? '')?.[1])).toBe(DLQ_MAX_RETRIES)
  })
})
