/**
 * One invocation against Cloudflare's per-invocation limits (src/platform-limits.ts): the calls it
 * makes to D1, KV and Queues are counted on the real local bindings (test/invocation-meter.ts) and
 * compared with what Cloudflare documents, for the largest inputs the Worker takes.
 */

import { createExecutionContext, createMessageBatch } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import {
  INBOUND_EVENT_MAX_BYTES,
  QUEUE_BATCH_MAX_MESSAGES,
  QUEUE_MESSAGE_MAX_BYTES,
  utf8Length,
} from '@notify-edge/contracts'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import { D1_LIMITS, KV_LIMITS, WORKER_LIMITS } from '../src/platform-limits.ts'
import { FAKE_RESEND_TEAM_KEY_PREFIX, FAKE_RESEND_URL } from './fake-resend.ts'
import { ADMIN_TOKEN, freshInbound, guid, pendingNotification, seedContact, watchQueue } from './helpers.ts'
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
    const settled = watchQueue(batch)
    const ctx = createExecutionContext()
    await worker.queue(batch, meter.env)
    const result = await settled(ctx)
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

  it('a full notify-dispatch batch through resend, paced at the documented default, fits one invocation', async () => {
    // 50 sends at 5 a second: every send asks the account's pace for its slot (a Durable Object call,
    // a subrequest), makes its request to Resend (another), and an answer that spends Resend's
    // window and is reported to the pace (a third).
    const ids = await Promise.all(
      Array.from({ length: 50 }, (_, i) => pendingNotification(`limits-${i}-${guid().slice(0, 8)}@example.com`)),
    )
    const meter = meterEnv({
      ...env,
      EMAIL_TRANSPORT: 'resend',
      RESEND_API_KEY: `${FAKE_RESEND_TEAM_KEY_PREFIX}limits-${guid().slice(0, 8)}`,
      RESEND_API_URL: FAKE_RESEND_URL,
      RESEND_REQUESTS_PER_SECOND: '5',
      // One request per email (no /emails/batch): the most subrequests and the longest pace 50 sends can cost.
      RESEND_BATCH_SIZE: '1',
    } as Env)
    const batch = createMessageBatch(
      'notify-dispatch',
      ids.map((id, index) => ({
        id: `send-${index}`,
        timestamp: new Date(),
        attempts: 1,
        body: { notificationId: id },
      })),
    )
    const settled = watchQueue(batch)
    const ctx = createExecutionContext()
    await worker.queue(batch, meter.env)
    const result = await settled(ctx)
    const usage = meter.usage()
    // The requests to Resend, as the fake counted them: those it took and those it refused for the rate.
    let fetches = 0
    for (const id of ids) {
      for (const path of ['sends', 'rate-limited']) {
        fetches += ((await (await fetch(`${FAKE_RESEND_URL}/control/${path}?key=${id}`)).json()) as { count: number })
          .count
      }
    }
    console.log(`invocation-limits: 50 paced sends ${JSON.stringify(usage)}, ${fetches} requests to Resend`)

    expect(result.explicitAcks).toHaveLength(50)
    // Each sent, or — when a request that left on its slot reached the stand-in late, in its next
    // window, as happens on a loaded machine — refused 429 and waiting for its retry; none failed.
    const statuses = await env.DB.prepare(
      `SELECT status, error_code, count(*) AS n FROM notifications WHERE id IN (SELECT value FROM json_each(?1))
       GROUP BY status, error_code`,
    )
      .bind(JSON.stringify(ids))
      .all<{ status: string; error_code: string | null; n: number }>()
    for (const group of statuses.results) {
      expect(['sent', 'pending:NTF_SEND_TRANSIENT']).toContain(
        group.status === 'sent' ? 'sent' : `${group.status}:${group.error_code}`,
      )
    }
    expect(statuses.results.reduce((sum, group) => sum + group.n, 0)).toBe(50)
    // One request each, whatever its answer.
    expect(fetches).toBe(50)
    // A slot per send, and a report only for an answer that changes the pace.
    expect(usage.durableObjects.calls).toBeGreaterThanOrEqual(50)
    expect(usage.durableObjects.calls).toBeLessThanOrEqual(100)
    expectWithinLimits({ ...usage, subrequests: usage.subrequests + fetches })
  })

  it('a bulk replay of 1,000 dead letters of 120 KB each keeps every invocation within the limits', async () => {
    const code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`
    for (let page = 0; page < 10; page += 1) {
      // Storing a full notify-dlq batch of them is itself one invocation within the limits.
      expectWithinLimits(await storeLargeDeadLetters(100, code))
    }

    const usages: Usage[] = []
    let replayed = 0
    let cursor: string | null | undefined
    do {
      const meter = meterEnv(env)
      const response = await worker.fetch(
        new Request('http://worker/v1/dead-letters/replay', {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ code, max: 1000, ...(cursor ? { cursor } : {}) }),
        }),
        meter.env,
        createExecutionContext(),
      )
      expect(response.status).toBe(200)
      const body = (await response.json()) as { replayed: string[]; nextCursor?: string | null }
      replayed += body.replayed.length
      cursor = body.nextCursor
      usages.push(meter.usage())
      expect(usages.length).toBeLessThanOrEqual(1000)
    } while (cursor)
    console.log(`invocation-limits: bulk replay ${JSON.stringify(usages)}`)

    expect(replayed).toBe(1000)
    const rows = await env.DB.prepare(
      "SELECT count(*) AS n, sum(status = 'replayed' AND replays = 1) AS once FROM dead_letters WHERE code = ?1",
    )
      .bind(code)
      .first()
    expect(rows).toEqual({ n: 1000, once: 1000 })
    expect(usages.reduce((sum, usage) => sum + usage.queues.messages, 0)).toBe(1000)
    for (const usage of usages) expectWithinLimits(usage)
  })

  it("the console's bulk replay follows the pages over the whole set, a replayed one too", async () => {
    const code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`
    await storeLargeDeadLetters(100, code)
    await storeLargeDeadLetters(50, code)
    await env.DB.prepare("UPDATE dead_letters SET status = 'replayed' WHERE code = ?1").bind(code).run()
    const visit = async (path: string, init: RequestInit = {}) =>
      worker.fetch(new Request(`http://worker${path}`, { redirect: 'manual', ...init }), env, createExecutionContext())
    const signedIn = await visit('/console/sign-in', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
      body: new URLSearchParams({ token: ADMIN_TOKEN }).toString(),
    })
    const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
    const preview = await (
      await visit(`/console/dead-letters/bulk?action=replay&code=${code}&status=replayed`, { headers: { cookie } })
    ).text()
    const csrf = /name="_csrf" value="([^"]+)"/.exec(preview)?.[1] ?? ''
    expect(preview).toContain('Replay 150')
    const done = await visit('/console/dead-letters/bulk', {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
      body: new URLSearchParams({ _csrf: csrf, action: 'replay', code, status: 'replayed' }).toString(),
    })
    expect(done.status).toBe(200)
    expect(await done.text()).toContain('Replayed 150 dead letters')
    const rows = await env.DB.prepare(
      'SELECT count(*) AS n, sum(replays = 1) AS once FROM dead_letters WHERE code = ?1',
    )
      .bind(code)
      .first()
    expect(rows).toEqual({ n: 150, once: 150 })
  })
})

const padding = 'x'.repeat(INBOUND_EVENT_MAX_BYTES - 1_500)

/**
 * Stores `count` dead letters of `code` through the notify-dlq consumer (one invocation, metered),
 * each a response.created event of nearly INBOUND_EVENT_MAX_BYTES — the largest ingest takes. Their
 * events are marked processed in KV, so a replay brings them back as duplicates that send nothing.
 */
async function storeLargeDeadLetters(count: number, code: string): Promise<Usage> {
  const events = Array.from({ length: count }, () =>
    freshInbound('response.created', (value) => {
      ;(value.data as Record<string, unknown>).attachmentNote = padding
    }),
  )
  expect(utf8Length(JSON.stringify(events[0]))).toBeGreaterThan(INBOUND_EVENT_MAX_BYTES - 1_000)
  await Promise.all(
    events.map((event) =>
      env.IDEMPOTENCY.put(`arthunt:response.created:${JSON.parse(event.body).envelope.eventId}`, '1'),
    ),
  )
  const meter = meterEnv(env)
  const batch = createMessageBatch(
    'notify-dlq',
    events.map((message, index) => ({
      id: `large-${guid()}-${index}`,
      timestamp: new Date(),
      attempts: 1,
      body: {
        notifyEdgeDeadLetter: 1,
        queue: 'notify-events',
        code,
        error: 'test',
        attempts: 3,
        failureId: guid(),
        failedAt: new Date().toISOString(),
        message,
      },
    })),
  )
  const settled = watchQueue(batch)
  const ctx = createExecutionContext()
  await worker.queue(batch, meter.env)
  expect((await settled(ctx)).explicitAcks).toHaveLength(count)
  return meter.usage()
}
