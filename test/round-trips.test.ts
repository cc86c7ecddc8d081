import { createExecutionContext, createMessageBatch } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import { countRoundTrips } from '../src/metrics/round-trips.ts'
import { freshInbound, seedContact } from './helpers.ts'

describe('D1 round trips per notify-events batch', () => {
  it('stay the same for 1, 10 and 100 events (one read, one write)', async () => {
    const counts: number[] = []
    for (const size of [1, 10, 100]) {
      const events = await Promise.all(
        Array.from({ length: size }, async (_, index) => {
          if (index % 2 === 0) return freshInbound('response.created')
          const event = freshInbound('verification-completed', (value) => {
            value.UserId = crypto.randomUUID()
            value.Decision = 'approved'
          })
          await seedContact(JSON.parse(event.body).UserId)
          return event
        }),
      )
      const { db, roundTrips } = countRoundTrips(env.DB)
      const batch = createMessageBatch(
        'notify-events',
        events.map((body, index) => ({ id: `rt-${size}-${index}`, timestamp: new Date(), attempts: 1, body })),
      )
      createExecutionContext()
      await worker.queue(batch, { ...env, DB: db } as Env)
      counts.push(roundTrips())
    }
    expect(counts).toEqual([2, 2, 2])
  })
})
