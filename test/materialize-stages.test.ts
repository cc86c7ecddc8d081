import { createMessageBatch } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, expectTypeOf, it } from 'vitest'
import type { InboundEvent } from '../src/contracts/index.ts'
import { createLogger } from '../src/log.ts'
import { EventsRun, type Work } from '../src/materialize/run.ts'
import { type Decoded, decodeStage } from '../src/materialize/stages/decode.ts'
import { type Enqueued, enqueueStage } from '../src/materialize/stages/enqueue.ts'
import { finishStage } from '../src/materialize/stages/finish.ts'
import { type Known, knownStage } from '../src/materialize/stages/known.ts'
import { type Planned, planStage } from '../src/materialize/stages/plan.ts'
import { type Written, writeStage } from '../src/materialize/stages/write.ts'
import { COUNTERS } from '../src/metrics/counters.ts'
import { freshInbound, guid } from './helpers.ts'

/** A notify-events batch of these bodies, first deliveries, and the run over it. */
function runOver(bodies: readonly unknown[]) {
  const batch = createMessageBatch(
    'notify-events',
    bodies.map((body) => ({ id: `msg-${guid()}`, timestamp: new Date(), attempts: 1, body })),
  )
  return { messages: batch.messages, run: new EventsRun(batch, env, createLogger('error')) }
}

/** notify_events_total over every outcome and source: the events counted as processed. */
async function eventsCounted(): Promise<number> {
  const row = await env.DB.prepare(`SELECT coalesce(sum(value), 0) AS n FROM counters WHERE name = ?1`)
    .bind(COUNTERS.events)
    .first<{ n: number }>()
  return row?.n ?? 0
}

function eventIdOf(event: InboundEvent): string {
  return JSON.parse(event.body).envelope.eventId
}

describe('materialize stages', () => {
  it('each stage takes what the one before produced, and nothing a later stage reads is optional', () => {
    expectTypeOf(decodeStage).returns.toEqualTypeOf<Decoded[]>()
    expectTypeOf(knownStage).parameter(1).toEqualTypeOf<readonly Decoded[]>()
    expectTypeOf(knownStage).returns.resolves.toEqualTypeOf<Known[]>()
    expectTypeOf(planStage).parameter(1).toEqualTypeOf<readonly Known[]>()
    expectTypeOf(planStage).returns.resolves.toEqualTypeOf<Planned[]>()
    expectTypeOf(writeStage).parameter(1).toEqualTypeOf<readonly Planned[]>()
    expectTypeOf(writeStage).returns.resolves.toEqualTypeOf<Written[]>()
    expectTypeOf(enqueueStage).parameter(1).toEqualTypeOf<readonly Written[]>()
    expectTypeOf(enqueueStage).returns.resolves.toEqualTypeOf<Enqueued[]>()
    expectTypeOf(finishStage).parameter(1).toEqualTypeOf<readonly Enqueued[]>()
    expectTypeOf<Planned['inbound']>().toEqualTypeOf<InboundEvent>()
    expectTypeOf<Extract<Planned, { type: 'record' | 'duplicate' }>['work']>().toEqualTypeOf<Work>()
    expectTypeOf<Extract<Written, { type: 'record' }>['written']['committed']>().toEqualTypeOf<true>()
  })

  it('decode lets through only the events to plan or record; what leaves is settled there', () => {
    const valid = freshInbound('invitation.created')
    const invalid = freshInbound('response.created', (value) => {
      delete (value.data as { recipient: Record<string, unknown> }).recipient.email
    })
    const ignored = freshInbound('person-upserted')
    ignored.headers['event-type'] = 'person-deleted'
    const { messages, run } = runOver([valid, valid, { hello: 'world' }, invalid, ignored])

    const decoded = decodeStage(run, messages)

    expect(decoded.map((item) => [item.type, item.message])).toEqual([
      ['valid', messages[0]],
      ['ignored', messages[4]],
    ])
    const deadLetter = { action: 'dead-letter', code: 'NTF_INVALID_PAYLOAD' }
    // The first event and the ignored one are still on their way: a later stage settles them.
    expect(messages.map((message) => run.settlements.of(message))).toEqual([
      undefined,
      { action: 'ack' },
      expect.objectContaining(deadLetter),
      expect.objectContaining(deadLetter),
      undefined,
    ])
  })

  it('an event whose write fails leaves at the write, to be retried; its neighbour goes on written', async () => {
    const failing = freshInbound('invitation.created')
    const neighbour = freshInbound('invitation.created')
    const trigger = `fail_${eventIdOf(failing).replaceAll('-', '_')}`
    await env.DB.prepare(
      `CREATE TRIGGER ${trigger} BEFORE INSERT ON processed_marks WHEN NEW.event_id = '${eventIdOf(failing)}'
       BEGIN SELECT RAISE(ABORT, 'injected D1 failure'); END`,
    ).run()
    try {
      const { messages, run } = runOver([failing, neighbour])
      const planned = await planStage(run, await knownStage(run, decodeStage(run, messages)))
      expect(planned.map((item) => item.type)).toEqual(['record', 'record'])

      const counted = await eventsCounted()
      const written = await writeStage(run, planned)

      expect(written).toHaveLength(1)
      // The neighbour is counted; the failing one will be when a later attempt writes it.
      expect((await eventsCounted()) - counted).toBe(1)
      const [record] = written
      expect(record?.message).toBe(messages[1])
      expect(record?.type === 'record' && record.written).toMatchObject({ committed: true, won: true })
      expect(messages.map((message) => run.settlements.of(message))).toEqual([
        expect.objectContaining({ action: 'retry', code: 'NTF_DEPENDENCY_FAILED' }),
        undefined,
      ])
    } finally {
      await env.DB.prepare(`DROP TRIGGER ${trigger}`).run()
    }
  })

  it('an event two batches planned at once is counted by the one whose processed mark won, once', async () => {
    const event = freshInbound('invitation.created')
    const first = runOver([event])
    const second = runOver([event])
    // Both plan before either writes: neither sees the other's mark.
    const plannedFirst = await planStage(first.run, await knownStage(first.run, decodeStage(first.run, first.messages)))
    const plannedSecond = await planStage(
      second.run,
      await knownStage(second.run, decodeStage(second.run, second.messages)),
    )
    expect([...plannedFirst, ...plannedSecond].map((item) => item.type)).toEqual(['record', 'record'])
    const counted = await eventsCounted()

    const [won] = await writeStage(first.run, plannedFirst)
    const [lost] = await writeStage(second.run, plannedSecond)

    expect(won?.type === 'record' && won.written).toMatchObject({ committed: true, won: true })
    expect(lost?.type === 'record' && lost.written).toMatchObject({ committed: true, won: false })
    expect((await eventsCounted()) - counted).toBe(1)
  })
})
