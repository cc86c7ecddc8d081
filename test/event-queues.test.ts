/**
 * notify-events over EVENTS_QUEUE_SHARDS queues. This file runs in both
 * projects of vitest.config.ts: with the one queue of wrangler.toml, and with
 * two (notify-events and notify-events-1, each with its consumer).
 */
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { withBindings } from '../src/config.ts'
import type { InboundEvent } from '../src/contracts/index.ts'
import { shardOf } from '../src/crypto.ts'
import { ApiError } from '../src/errors.ts'
import worker from '../src/index.ts'
import { meterEnv } from '../src/metrics/invocation.ts'
import { eventQueues } from '../src/queue/event-queues.ts'
import { eventsBindingOf, eventsQueueOf, isEventsQueue, logicalQueueOf } from '../src/queue/names.ts'
import {
  ADMIN_TOKEN,
  deliverBatch,
  eventually,
  freshInbound,
  guid,
  INGEST_TOKEN,
  inbound,
  notificationsOf,
} from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const SHARDS = Number((env as unknown as Record<string, string>).EVENTS_QUEUE_SHARDS ?? '1')

/** Each real queue of notify-events, wrapped to note the source message id of every event sent to it. */
function recordingQueues(): { bindings: Record<string, Queue>; sentTo: Map<string, number> } {
  const sentTo = new Map<string, number>()
  const bindings: Record<string, Queue> = {}
  eventQueues(env, SHARDS).forEach((queue, shard) => {
    bindings[eventsBindingOf(shard)] = new Proxy(queue, {
      get(target, property) {
        if (property !== 'sendBatch') return Reflect.get(target, property).bind(target)
        return (messages: MessageSendRequest<InboundEvent>[], options?: QueueSendBatchOptions) => {
          for (const message of messages) sentTo.set(message.body.sourceMessageId, shard)
          return target.sendBatch(messages, options)
        }
      },
    })
  })
  return { bindings, sentTo }
}

/** `POST /v1/ingest` with the Worker's queues replaced by `bindings`. */
async function ingestThrough(bindings: Record<string, Queue>, events: InboundEvent[]): Promise<Response> {
  const ctx = createExecutionContext()
  const response = await worker.fetch(
    new Request('http://worker/v1/ingest', {
      method: 'POST',
      headers: { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events }),
    }),
    withBindings(env, bindings as Partial<Env>),
    ctx,
  )
  await waitOnExecutionContext(ctx)
  return response
}

const eventIdOf = (event: InboundEvent) =>
  (JSON.parse(event.body) as { envelope: { eventId: string } }).envelope.eventId

/** Invitations until every shard has `each` of them: the shard of a fresh id is a coin toss. */
async function invitationsOnEveryShard(each: number): Promise<InboundEvent[]> {
  const events: InboundEvent[] = []
  const count = Array.from({ length: SHARDS }, () => 0)
  while (count.some((n) => n < each)) {
    const event = freshInbound('invitation.created')
    const shard = await shardOf(event.sourceMessageId, SHARDS)
    if ((count[shard] as number) >= each) continue
    count[shard] = (count[shard] as number) + 1
    events.push(event)
  }
  return events
}

describe(`notify-events over ${SHARDS} queue(s)`, () => {
  it('a batch is of notify-events when it came from it or a numbered shard of it, and its dead letters name notify-events', () => {
    expect(['notify-events', 'notify-events-1', 'notify-events-15'].map(isEventsQueue)).toEqual([true, true, true])
    expect(
      ['notify-email-events', 'notify-events-0', 'notify-events-01', 'notify-events-x'].map(isEventsQueue),
    ).toEqual([false, false, false, false])
    // A dead letter names the queue, not the shard: it is replayed and counted as notify-events'.
    expect(['notify-events-1', 'notify-events', 'notify-dispatch'].map(logicalQueueOf)).toEqual([
      'notify-events',
      'notify-events',
      'notify-dispatch',
    ])
  })

  it("ingest puts each event on the queue of its source message id; each shard's consumer tells every event once", async () => {
    const events = await invitationsOnEveryShard(3)
    const { bindings, sentTo } = recordingQueues()
    expect((await ingestThrough(bindings, events)).status).toBe(202)
    for (const event of events) {
      expect(sentTo.get(event.sourceMessageId)).toBe(await shardOf(event.sourceMessageId, SHARDS))
    }
    expect(new Set(sentTo.values()).size).toBe(SHARDS)
    for (const event of events) {
      const rows = await eventually(async () => {
        const found = await notificationsOf(eventIdOf(event))
        expect(found.map((row) => row.status)).toEqual(['sent'])
        return found
      })
      expect(rows).toHaveLength(1)
    }
  })

  it('one event arriving twice, on different queues, is told once', async () => {
    const event = freshInbound('invitation.created')
    // The same body under another source message id, chosen on the other shard where there are two.
    let again = inbound(JSON.parse(event.body), event.headers)
    const first = await shardOf(event.sourceMessageId, SHARDS)
    while (SHARDS > 1 && (await shardOf(again.sourceMessageId, SHARDS)) === first) {
      again = inbound(JSON.parse(event.body), event.headers)
    }
    const { bindings, sentTo } = recordingQueues()
    expect((await ingestThrough(bindings, [event, again])).status).toBe(202)
    expect(new Set([sentTo.get(event.sourceMessageId), sentTo.get(again.sourceMessageId)]).size).toBe(SHARDS)
    await eventually(async () => {
      const { results } = await env.DB.prepare(
        'SELECT count(*) AS n FROM dead_letters WHERE source_message_id IN (?1, ?2) UNION ALL SELECT count(*) FROM processed_marks WHERE event_id = ?3',
      )
        .bind(event.sourceMessageId, again.sourceMessageId, eventIdOf(event))
        .all<{ n: number }>()
      expect(results.map((row) => row.n)).toEqual([0, 1])
    })
    const rows = await eventually(async () => {
      const found = await notificationsOf(eventIdOf(event))
      expect(found.map((row) => row.status)).toEqual(['sent'])
      return found
    })
    const { results: sent } = await env.DB.prepare('SELECT count(*) AS n FROM sent_messages WHERE notification_id = ?1')
      .bind(rows[0]?.id)
      .all<{ n: number }>()
    expect(sent[0]?.n).toBe(1)
  })

  it("a shard's dead letter is stored as notify-events', and a replay spreads the events over the shards by source message id", async () => {
    // Invitations whose recipient has no email: each becomes a dead letter at its first delivery.
    const events = (await invitationsOnEveryShard(2)).map((event) => {
      const value = JSON.parse(event.body) as { data: { recipient: Record<string, unknown> } }
      delete value.data.recipient.email
      return { ...event, body: JSON.stringify(value) }
    })
    // All carried by the last shard (notify-events-1 where there are two), whatever their own.
    const carrier = eventsQueueOf(SHARDS - 1)
    const died = await deliverBatch(
      events.map((body) => ({ id: `msg-${guid()}`, attempts: 1, body })),
      carrier,
    )
    expect(died.explicitAcks).toHaveLength(events.length)
    const ids = events.map((event) => event.sourceMessageId)
    const stored = await eventually(async () => {
      const { results } = await env.DB.prepare(
        'SELECT queue, code FROM dead_letters WHERE source_message_id IN (SELECT value FROM json_each(?1))',
      )
        .bind(JSON.stringify(ids))
        .all<{ queue: string; code: string }>()
      expect(results).toHaveLength(events.length)
      return results
    })
    expect(stored).toEqual(events.map(() => ({ queue: 'notify-events', code: 'NTF_INVALID_PAYLOAD' })))

    const { bindings, sentTo } = recordingQueues()
    const ctx = createExecutionContext()
    const answer = await worker.fetch(
      new Request('http://worker/v1/dead-letters/replay', {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ queue: 'notify-events', code: 'NTF_INVALID_PAYLOAD', max: 100 }),
      }),
      withBindings(env, bindings as Partial<Env>),
      ctx,
    )
    await waitOnExecutionContext(ctx)
    expect(answer.status).toBe(200)
    expect(((await answer.json()) as { replayed: string[] }).replayed).toHaveLength(events.length)
    for (const id of ids) expect(sentTo.get(id)).toBe(await shardOf(id, SHARDS))
    expect(new Set(sentTo.values()).size).toBe(SHARDS)
  })

  it("a shard that falls behind shows in the consumer lag, whatever another shard's fresher batch wrote after it", async () => {
    const at = (msAgo: number) => (value: Record<string, unknown>) => {
      ;(value.envelope as Record<string, unknown>).occurredAt = new Date(Date.now() - msAgo).toISOString()
    }
    // Kafka-sourced, so that only these two write that source's lag.
    const behind = { ...freshInbound('invitation.created', at(365 * 86_400_000)), source: 'kafka' as const }
    const fresh = { ...freshInbound('invitation.created', at(0)), source: 'kafka' as const }
    await deliverBatch([{ id: `msg-${guid()}`, attempts: 1, body: behind }], 'notify-events-1')
    await deliverBatch([{ id: `msg-${guid()}`, attempts: 1, body: fresh }], 'notify-events')
    const metrics = await (
      await fetchWorker('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    ).text()
    for (const name of ['notify_consumer_lag_seconds', 'notifications_consumer_lag_seconds']) {
      const sample = new RegExp(`^${name}\\{source="kafka"\\} (\\S+)$`, 'm').exec(metrics)
      expect(Number(sample?.[1])).toBeGreaterThan(364 * 86_400)
    }
  })

  it("every shard's producer is metered: what each sends is counted in the invocation's cost", async () => {
    const { env: metered, cost } = meterEnv(env)
    for (let shard = 0; shard < SHARDS; shard++) {
      const queue = (metered as unknown as Record<string, Queue>)[eventsBindingOf(shard)] as Queue
      await queue.send(freshInbound('invitation.created'), { contentType: 'json' })
    }
    expect(cost.queueWrites).toBe(SHARDS)
  })

  it('a shard the configuration counts but the Worker lacks is refused, naming the binding and the queue to add', async () => {
    expect(() => eventQueues({ EVENTS: env.EVENTS }, 2)).toThrow(
      expect.objectContaining({
        code: 'CONFIG_INVALID',
        message: expect.stringMatching(/EVENTS_1 is not bound.*notify-events-1/),
      }),
    )
    expect(() => eventQueues({ EVENTS: env.EVENTS }, 2)).toThrow(ApiError)
    const response = await ingestThrough({ EVENTS_1: undefined as unknown as Queue }, [
      freshInbound('invitation.created'),
    ])
    if (SHARDS === 1) expect(response.status).toBe(202)
    else {
      expect(response.status).toBe(500)
      expect(await response.json()).toMatchObject({ error: { code: 'CONFIG_INVALID' } })
    }
  })
})
