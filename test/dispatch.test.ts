import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { paceName } from '../src/dispatch/pace/client.ts'
import { FAKE_RESEND_TEAM_KEY_PREFIX, FAKE_RESEND_URL } from './fake-resend.ts'
import {
  type DispatchOutcome,
  deliver,
  dispatchOnce,
  eventually,
  guid,
  parseMime,
  pendingNotification,
  runCron,
} from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

type Row = {
  id: string
  status: string
  scheduled_at: string
  send_attempts: number
  provider_id: string | null
  error_code: string | null
  status_reason: string | null
  lease_until: string | null
  claim_token: string | null
}

/** How many send requests for this notification reached the fake provider. */
async function providerRequests(id: string): Promise<number> {
  const response = await fetch(`${FAKE_RESEND_URL}/control/sends?key=${id}`)
  return ((await response.json()) as { count: number }).count
}

/** How many emails the fake provider accepted for this notification (its Idempotency-Key). */
async function providerEmails(id: string): Promise<number> {
  const response = await fetch(`${FAKE_RESEND_URL}/control/emails?key=${id}`)
  return ((await response.json()) as { count: number }).count
}

async function rowOf(id: string): Promise<Row> {
  return (await env.DB.prepare('SELECT * FROM notifications WHERE id = ?1').bind(id).first<Row>()) as Row
}

const resendEnv = (overrides: Record<string, string> = {}) => ({
  ...env,
  EMAIL_TRANSPORT: 'resend',
  RESEND_API_KEY: 'test-resend-key',
  RESEND_API_URL: 'http://fake-resend.test',
  ...overrides,
})

/** Delivers a dispatch message (without a due time, as one from before due times) with an env of our choosing. */
function dispatch(id: string, attempts = 1, overrides?: Record<string, unknown>) {
  return dispatchOnce({ notificationId: id }, overrides ?? {}, attempts)
}

/**
 * Moves a pending notification's retry time to just now, as if its wait were
 * over, and returns the message of that time (the one the queue would deliver).
 */
async function retryTimeReached(id: string): Promise<{ notificationId: string; due: string }> {
  const due = new Date(Date.now() - 1).toISOString()
  await env.DB.prepare("UPDATE notifications SET scheduled_at = ?2 WHERE id = ?1 AND status = 'pending'")
    .bind(id, due)
    .run()
  return { notificationId: id, due }
}

/** Asserts a retry: acked, the row pending `delay` seconds from the try, one message for that time. */
async function expectRetryIn(id: string, result: DispatchOutcome, delay: number, startedAt: number) {
  expect(result.delays).toEqual([])
  expect(result.explicitAcks).toHaveLength(1)
  const row = await rowOf(id)
  expect(row.status).toBe('pending')
  const at = Date.parse(row.scheduled_at)
  // workerd's clock moves only on I/O: a second of slack for where each side read it.
  expect(at).toBeGreaterThanOrEqual(startedAt + delay * 1000 - 1000)
  expect(at).toBeLessThanOrEqual(Date.now() + delay * 1000)
  expect(result.enqueued.map((message) => message.body)).toEqual([{ notificationId: id, due: row.scheduled_at }])
  const queued = result.enqueued[0]?.delaySeconds ?? 0
  expect(queued).toBeLessThanOrEqual(Math.min(43_200, delay))
  expect(queued).toBeGreaterThanOrEqual(Math.min(43_200, delay) - 1)
}

describe('notify-dispatch consumer', () => {
  it('two concurrent deliveries of one dispatch message → one claim, one email', async () => {
    const id = await pendingNotification(`concurrent-${guid().slice(0, 8)}@example.com`)
    const results = await Promise.all([dispatch(id), dispatch(id), dispatch(id)])
    for (const result of results) expect(result.explicitAcks).toHaveLength(1)
    const row = await rowOf(id)
    expect(row).toMatchObject({ status: 'sent', send_attempts: 1 })
    const { results: sent } = await env.DB.prepare('SELECT raw FROM sent_messages WHERE notification_id = ?1')
      .bind(id)
      .all<{ raw: string }>()
    expect(sent).toHaveLength(1)
    expect(parseMime(sent[0]?.raw as string).headers['message-id']).toBe(`<${id}@notify-edge.example>`)
  })

  it('by default (SENT_MESSAGE_RETENTION_DAYS 0) the exact message is not kept: sent, and no sent_messages row', async () => {
    const id = await pendingNotification(`unkept-${guid().slice(0, 8)}@example.com`)
    const result = await dispatch(id, 1, { SENT_MESSAGE_RETENTION_DAYS: '0' })
    expect(result.explicitAcks).toHaveLength(1)
    expect(await rowOf(id)).toMatchObject({ status: 'sent', send_attempts: 1 })
    const kept = await env.DB.prepare('SELECT count(*) AS n FROM sent_messages WHERE notification_id = ?1')
      .bind(id)
      .first<{ n: number }>()
    expect(kept?.n).toBe(0)
  })

  it('a notification that is not due yet goes back on the queue instead of out', async () => {
    const later = new Date(Date.now() + 3_600_000).toISOString()
    const id = await pendingNotification(`later-${guid().slice(0, 8)}@example.com`, { scheduledAt: later })
    const result = await dispatch(id)
    expect(result.explicitAcks).toHaveLength(1)
    expect(await rowOf(id)).toMatchObject({ status: 'pending', send_attempts: 0 })
  })

  it('resend: sends with the notification id as Idempotency-Key and records the provider id', async () => {
    const id = await pendingNotification(`ok-${guid().slice(0, 8)}@example.com`)
    const result = await dispatch(id, 1, resendEnv())
    expect(result.explicitAcks).toHaveLength(1)
    expect(await rowOf(id)).toMatchObject({ status: 'sent', provider_id: `re_${id}` })
    const sent = await env.DB.prepare('SELECT transport FROM sent_messages WHERE notification_id = ?1').bind(id).first()
    expect(sent).toEqual({ transport: 'resend' })
  })

  it('resend: a transient failure follows the retry policy on the row (its time kept, one message for it), then is dead-lettered and failed', async () => {
    // The default policy: 10 attempts, starting 5 s, 30 s, 60 s.
    const first = await pendingNotification(`transient-${guid().slice(0, 8)}@example.com`)
    let started = Date.now()
    await expectRetryIn(first, await dispatch(first, 1, resendEnv()), 5, started)
    expect(await rowOf(first)).toMatchObject({ error_code: 'NTF_SEND_TRANSIENT', send_attempts: 1 })
    started = Date.now()
    await expectRetryIn(first, await dispatchOnce(await retryTimeReached(first), resendEnv()), 30, started)
    started = Date.now()
    await expectRetryIn(first, await dispatchOnce(await retryTimeReached(first), resendEnv()), 60, started)
    // A shorter policy, to walk to its end: 5 s, 30 s, then the dead letter.
    const short = { DISPATCH_RETRY_DELAYS_SECONDS: '5,30' }
    const id = await pendingNotification(`transient-${guid().slice(0, 8)}@example.com`)
    await expectRetryIn(id, await dispatch(id, 1, resendEnv(short)), 5, Date.now())
    await expectRetryIn(id, await dispatchOnce(await retryTimeReached(id), resendEnv(short)), 30, Date.now())
    const last = await dispatchOnce(await retryTimeReached(id), resendEnv(short))
    expect(last.delays).toEqual([])
    expect(last.enqueued).toEqual([])
    expect(last.explicitAcks).toHaveLength(1)
    expect(await rowOf(id)).toMatchObject({ status: 'failed', error_code: 'NTF_SEND_TRANSIENT', send_attempts: 3 })
    await eventually(async () => {
      const dead = await env.DB.prepare('SELECT code, queue FROM dead_letters WHERE body LIKE ?1')
        .bind(`%${id}%`)
        .first()
      expect(dead).toEqual({ code: 'NTF_SEND_TRANSIENT', queue: 'notify-dispatch' })
    })
  })

  it('a replayed notification starts its attempts again: the whole retry policy, not one last try', async () => {
    const id = await pendingNotification(`transient-${guid().slice(0, 8)}@example.com`)
    await dispatch(id, 1, resendEnv({ DISPATCH_RETRY_DELAYS_SECONDS: '5' }))
    await dispatchOnce(await retryTimeReached(id), resendEnv({ DISPATCH_RETRY_DELAYS_SECONDS: '5' }))
    expect(await rowOf(id)).toMatchObject({ status: 'failed', send_attempts: 2 })
    const dead = await eventually(async () => {
      const row = await env.DB.prepare('SELECT id FROM dead_letters WHERE body LIKE ?1')
        .bind(`%${id}%`)
        .first<{ id: string }>()
      expect(row).toBeTruthy()
      return row as { id: string }
    })
    const answer = await fetchWorker(`/v1/dead-letters/${dead.id}/replay`, {
      method: 'POST',
      headers: { authorization: 'Bearer test-admin-token-0123456789' },
    })
    expect(answer.status).toBe(200)
    expect(await rowOf(id)).toMatchObject({ status: 'pending', send_attempts: 0 })
  })

  it('a retry time is authoritative: a 429 that asked for an hour is not tried again before the hour', async () => {
    // A 429 holds every send of its account for its retry-after (src/dispatch/pace/): this one asks for
    // an hour, so it is sent through a team of its own, whose pace no other test uses.
    const ownTeam = { RESEND_API_KEY: `${FAKE_RESEND_TEAM_KEY_PREFIX}retry-time-${guid().slice(0, 8)}` }
    const id = await pendingNotification(`ratelimited-${guid().slice(0, 8)}@example.com`)
    const original = { notificationId: id, due: (await rowOf(id)).scheduled_at }
    await expectRetryIn(id, await dispatchOnce(original, resendEnv(ownTeam)), 3600, Date.now())
    expect(await providerRequests(id)).toBe(1)
    const { scheduled_at: retryAt, enqueued_at: retryEnqueuedAt } = (await env.DB.prepare(
      'SELECT scheduled_at, enqueued_at FROM notifications WHERE id = ?1',
    )
      .bind(id)
      .first()) as { scheduled_at: string; enqueued_at: string }
    // The old message redelivered: stale, acked, nothing sent, nothing enqueued.
    const redelivered = await dispatchOnce(original, resendEnv(ownTeam))
    expect(redelivered.explicitAcks).toHaveLength(1)
    expect(redelivered.enqueued).toEqual([])
    // A message of the new time arriving early (Queues delay at most 12 h): back on the queue, not sent.
    const early = await dispatchOnce({ notificationId: id, due: retryAt }, resendEnv(ownTeam))
    expect(early.enqueued.map((message) => message.body)).toEqual([{ notificationId: id, due: retryAt }])
    // Put back on the queue, its message is stamped (not older than the retry's own).
    const { enqueued_at: enqueuedAt } = (await env.DB.prepare('SELECT enqueued_at FROM notifications WHERE id = ?1')
      .bind(id)
      .first()) as { enqueued_at: string }
    expect(enqueuedAt >= retryEnqueuedAt).toBe(true)
    // The cron three minutes later: the notification is not lost, so it is not enqueued again.
    await runCron(new Date(Date.now() + 180_000), resendEnv(ownTeam))
    expect((await rowOf(id)).status).toBe('pending')
    const after = await env.DB.prepare('SELECT enqueued_at FROM notifications WHERE id = ?1').bind(id).first()
    expect(after).toEqual({ enqueued_at: enqueuedAt })
    expect(await providerRequests(id)).toBe(1)
  })

  it('resend: a refusal of this message (422) ends the notification failed as a dead letter to replay, without retry', async () => {
    const id = await pendingNotification(`permanent-${guid().slice(0, 8)}@example.com`)
    const result = await dispatch(id, 1, resendEnv())
    expect(result.delays).toEqual([])
    expect(result.enqueued).toEqual([])
    expect(result.explicitAcks).toHaveLength(1)
    const row = await rowOf(id)
    expect(row).toMatchObject({ status: 'failed', error_code: 'NTF_SEND_PERMANENT', send_attempts: 1 })
    expect(row.status_reason).toContain('HTTP 422')
    await eventually(async () => {
      const dead = await env.DB.prepare('SELECT code, queue, kind FROM dead_letters WHERE body LIKE ?1')
        .bind(`%${id}%`)
        .first()
      expect(dead).toEqual({ code: 'NTF_SEND_PERMANENT', queue: 'notify-dispatch', kind: 'InvitationCreated' })
    })
  })

  it('resend: an answer lost after the provider accepted is retried as the same request, and answered without a second email', async () => {
    // The chaos run's slow provider outlived the transport's timeout this way: the provider
    // accepted, the Worker saw a failure. The retry must be the very same request, so that the
    // provider's idempotency answers it instead of sending again.
    const id = await pendingNotification(`lostanswer-${guid().slice(0, 8)}@example.com`)
    await expectRetryIn(id, await dispatch(id, 1, resendEnv()), 5, Date.now())
    expect(await rowOf(id)).toMatchObject({ status: 'pending', error_code: 'NTF_SEND_TRANSIENT' })
    const retry = await dispatchOnce(await retryTimeReached(id), resendEnv())
    expect(retry.explicitAcks).toHaveLength(1)
    expect(await rowOf(id)).toMatchObject({ status: 'sent', provider_id: `re_${id}`, send_attempts: 2 })
    expect(await providerRequests(id)).toBe(2)
    expect(await providerEmails(id)).toBe(1)
  })

  it('resend: a retry the provider refuses as another payload under the same key ends failed, not retried', async () => {
    const id = await pendingNotification(`lostanswer-${guid().slice(0, 8)}@example.com`)
    await expectRetryIn(id, await dispatch(id, 1, resendEnv()), 5, Date.now())
    // The sender's name changed between the attempts: the payload differs, the key does not.
    const retry = await dispatchOnce(await retryTimeReached(id), resendEnv({ EMAIL_FROM_NAME: 'Другое имя' }))
    expect(retry.delays).toEqual([])
    expect(retry.enqueued).toEqual([])
    expect(retry.explicitAcks).toHaveLength(1)
    const row = await rowOf(id)
    expect(row).toMatchObject({ status: 'failed', error_code: 'NTF_SEND_PERMANENT' })
    expect(row.status_reason).toContain('invalid_idempotent_request')
    expect(await providerEmails(id)).toBe(1)
  })

  it('the cron re-enqueues a pending notification whose dispatch message was lost, and it is sent', async () => {
    const past = new Date(Date.now() - 3_600_000).toISOString()
    const id = await pendingNotification(`lost-${guid().slice(0, 8)}@example.com`, { scheduledAt: past })
    await env.DB.prepare('UPDATE notifications SET enqueued_at = ?2 WHERE id = ?1').bind(id, past).run()
    const { createExecutionContext, createScheduledController, waitOnExecutionContext } = await import(
      'cloudflare:test'
    )
    const { default: worker } = await import('../src/index.ts')
    const ctx = createExecutionContext()
    await worker.scheduled(createScheduledController({ scheduledTime: new Date(), cron: '* * * * *' }), env)
    await waitOnExecutionContext(ctx)
    await eventually(async () => expect((await rowOf(id)).status).toBe('sent'))
  })

  it('a send that waits longer than its lease: the lease is renewed, neither the cron nor a redelivery takes it over, one send', async () => {
    // No send outlasts its lease (DISPATCH_LEASE_SECONDS is at least three RESEND_TIMEOUT_SECONDS,
    // src/config.ts); the wait for a send slot can: the account's pace is held past the lease.
    const id = await pendingNotification(`paced-${guid().slice(0, 8)}@example.com`)
    const apiKey = `${FAKE_RESEND_TEAM_KEY_PREFIX}lease-${guid().slice(0, 8)}`
    const slowEnv = resendEnv({ DISPATCH_LEASE_SECONDS: '3', RESEND_TIMEOUT_SECONDS: '1', RESEND_API_KEY: apiKey })
    await env.SEND_PACE.getByName(await paceName(apiKey)).observe({
      perSecond: 500,
      holdSeconds: 9,
      cause: 'window-spent',
    })
    const first = dispatch(id, 1, slowEnv)
    await eventually(async () => expect((await rowOf(id)).status).toBe('sending'))
    const claimed = await rowOf(id)
    expect(claimed.status).toBe('sending')
    const firstLeaseEnd = Date.parse(claimed.lease_until as string)
    // Past the lease the claim was taken with: without renewal, it would be anyone's now.
    await eventually(async () => {
      expect(Date.now()).toBeGreaterThan(firstLeaseEnd + 500)
      expect(Date.parse((await rowOf(id)).lease_until as string)).toBeGreaterThan(Date.now())
    })
    const { createExecutionContext, createScheduledController, waitOnExecutionContext } = await import(
      'cloudflare:test'
    )
    const { default: worker } = await import('../src/index.ts')
    const ctx = createExecutionContext()
    await worker.scheduled(createScheduledController({ scheduledTime: new Date(), cron: '* * * * *' }), slowEnv as Env)
    await waitOnExecutionContext(ctx)
    const second = await dispatch(id, 1, slowEnv)
    expect(second.explicitAcks).toHaveLength(1)
    // Still waiting for its slot: nothing reached the provider, from the first delivery or the second.
    expect(await providerRequests(id)).toBe(0)

    expect((await first).explicitAcks).toHaveLength(1)
    expect(await rowOf(id)).toMatchObject({ status: 'sent', send_attempts: 1, provider_id: `re_${id}` })
    expect(await providerRequests(id)).toBe(1)
  })

  it('a delivery whose claim was taken over records nothing: the marks apply only under the token that claimed', async () => {
    const id = await pendingNotification(`slow-${guid().slice(0, 8)}@example.com`)
    const first = dispatch(id, 1, resendEnv())
    await eventually(async () => expect(await providerRequests(id)).toBe(1))
    // As a delivery that took the claim over after a lost lease would have left it.
    const later = new Date(Date.now() + 600_000).toISOString()
    await env.DB.prepare("UPDATE notifications SET claim_token = 'another-claim', lease_until = ?2 WHERE id = ?1")
      .bind(id, later)
      .run()
    await fetch(`${FAKE_RESEND_URL}/control/release?key=${id}`, { method: 'POST' })
    expect((await first).explicitAcks).toHaveLength(1)
    expect(await rowOf(id)).toMatchObject({ status: 'sending', claim_token: 'another-claim', provider_id: null })
    const recorded = await env.DB.prepare('SELECT count(*) AS n FROM sent_messages WHERE notification_id = ?1')
      .bind(id)
      .first()
    expect(recorded).toEqual({ n: 0 })
  })

  it('a dispatch message for an unknown notification is acked; a malformed one is dead-lettered', async () => {
    expect((await deliver({ notificationId: 'ntf_missing' }, 1, 'x1', 'notify-dispatch')).explicitAcks).toEqual(['x1'])
    const marker = guid()
    expect((await deliver({ wrong: marker }, 1, 'x2', 'notify-dispatch')).explicitAcks).toEqual(['x2'])
    await eventually(async () => {
      const dead = await env.DB.prepare('SELECT code, queue FROM dead_letters WHERE body LIKE ?1')
        .bind(`%${marker}%`)
        .first()
      expect(dead).toEqual({ code: 'NTF_INVALID_PAYLOAD', queue: 'notify-dispatch' })
    })
  })
})
