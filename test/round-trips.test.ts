import { createExecutionContext, createMessageBatch } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import { freshInbound, seedContact } from './helpers.ts'

/** The real D1 binding, with every round trip (a batch, or one statement run on its own) counted. */
function countingDb(db: D1Database) {
  const counter = { roundTrips: 0 }
  const executions = new Set(['run', 'all', 'first', 'raw'])
  const wrapStatement = (statement: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(statement, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver)
        if (typeof value !== 'function') return value
        if (property === 'bind') return (...args: unknown[]) => wrapStatement(value.apply(target, args))
        if (executions.has(String(property))) {
          return (...args: unknown[]) => {
            counter.roundTrips += 1
            return value.apply(target, args)
          }
        }
        return value.bind(target)
      },
    })
  const proxy = new Proxy(db, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver)
      if (property === 'prepare') return (query: string) => wrapStatement(target.prepare(query))
      if (property === 'batch') {
        return (statements: D1PreparedStatement[]) => {
          counter.roundTrips += 1
          return target.batch(statements)
        }
      }
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return { db: proxy, counter }
}

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
      const { db, counter } = countingDb(env.DB)
      const batch = createMessageBatch(
        'notify-events',
        events.map((body, index) => ({ id: `rt-${size}-${index}`, timestamp: new Date(), attempts: 1, body })),
      )
      createExecutionContext()
      await worker.queue(batch, { ...env, DB: db } as Env)
      counts.push(counter.roundTrips)
    }
    expect(counts).toEqual([2, 2, 2])
  })
})
