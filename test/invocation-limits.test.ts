/**
 * One invocation against Cloudflare's per-invocation limits (src/platform-limits.ts): the calls it
 * makes to D1, KV and Queues are counted on the real local bindings (test/invocation-meter.ts) and
 * compared with what Cloudflare documents, for the largest inputs the Worker takes.
 */

import { createExecutionContext, createMessageBatch, getQueueResult } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { QUEUE_BATCH_MAX_MESSAGES, QUEUE_MESSAGE_MAX_BYTES } from '@notify-edge/contracts'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import { D1_LIMITS, KV_LIMITS, WORKER_LIMITS } from '../src/platform-limits.ts'
import { freshInbound, guid, seedContact } from './helpers.ts'
import { meterEnv, type Usage } from './invocation-meter.ts'

/** Cloudflare Queues: a `sendBatch` holds at most 256 KB (https://developers.cloudflare.com/queues/platform/limits/). */
const QUEUE_SEND_BATCH_BYTES = 256_000

/**
 * What one invocation may read from D1 in characters. A body read in a Worker exists several times
 * at once — D1's answer, the row, the parsed value, the queue request — in an isolate of 128 MB
 * that holds the code and the other invocations too, so one invocation keeps to an eighth of it.
 */
const READ_BUDGET_CHARS = WORKER_LIMITS.memoryBytes / 8

/** Every count of `usage` is within what Cloudflare allows one invocation. */
function expectWithinLimits(usage: Usage) {
  expect(usage.subrequests).toBeLessThanOrEqual(WORKER_LIMITS.subrequests)
  expect(usage.d1.calls).toBeLessThanOrEqual(D1_LIMITS.queriesPerInvocation)
  expect(usage.d1.maxBoundParameters).toBeLessThanOrEqual(D1_LIMITS.boundParameters)
  expect(usage.d1.maxStatementBytes).toBeLessThanOrEqual(D1_LIMITS.statementBytes)
  expect(usage.d1.maxValueBytes).toBeLessThanOrEqual(D1_LIMITS.valueBytes)
  expect(usage.d1.charsRead).toBeLessThanOrEqual(READ_BUDGET_CHARS)
  expect(usage.kv.calls).toBeLessThanOrEqual(KV_LIMITS.operationsPerInvocation)
  expect(usage.queues.maxMessagesPerCall).toBeLessThanOrEqual(QUEUE_BATCH_MAX_MESSAGES)
  expect(usage.queues.maxBytesPerCall).toBeLessThanOrEqual(QUEUE_SEND_BATCH_BYTES)
  expect(usage.queues.maxMessageBytes).toBeLessThanOrEqual(QUEUE_MESSAGE_MAX_BYTES)
}

describe('per-invocation limits', () => {
  it('a notify-events batch of 100 pool-wide verification requests, 2,000 notifications, fits one invocation', async () => {
    const reviewers = Array.from({ length: 20 }, () => guid())
    await env.DB.prepare('DELETE FROM reviewer_pool').run()
    for (const reviewer of reviewers) {
      await seedContact(reviewer)
      await env.DB.prepare('INSERT INTO reviewer_pool (user_id, added_at) VALUES (?1, ?2)')
        .bind(reviewer, new Date().toISOString())
        .run()
    }
    const events = Array.from({ length: 100 }, () =>
      freshInbound('verification-request-submitted', (value) => {
        delete value.ReviewerUserId
      }),
    )
    const meter = meterEnv(env)
    const batch = createMessageBatch(
      'notify-events',
      events.map((body, index) => ({ id: `pool-${index}`, timestamp: new Date(), attempts: 1, body })),
    )
    const ctx = createExecutionContext()
    await worker.queue(batch, meter.env)
    const result = await getQueueResult(batch, ctx)
    const usage = meter.usage()
    console.log(`invocation-limits: 100 pool events ${JSON.stringify(usage)}`)

    // The write went through: every event recorded, 20 pending notifications each, one dispatch message each.
    expect(result.explicitAcks).toHaveLength(100)
    const ids = JSON.stringify(events.map((event) => event.headers['message-id']))
    const written = await env.DB.prepare(
      `SELECT count(*) AS n, count(DISTINCT event_id) AS events, sum(status = 'pending') AS pending
       FROM notifications WHERE event_id IN (SELECT value FROM json_each(?1))`,
    )
      .bind(ids)
      .first()
    expect(written).toEqual({ n: 2000, events: 100, pending: 2000 })
    expect(usage.queues.messages).toBe(2000)
    // Each notification is a statement of its own in the write's one D1 batch: none comes near a statement's limits.
    expect(usage.d1.statements).toBeGreaterThan(2000)
    expectWithinLimits(usage)
  })
})
