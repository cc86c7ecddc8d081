/**
 * Configuration failures pause, they do not burn: a refusal about our own
 * configuration (a revoked key, an unverified sender, a quota) pauses the
 * transport; its notifications wait `paused` with the reason, nothing ends
 * `failed`, one notification at a time is tried with backoff, and the first
 * accepted send resumes the transport and releases the rest.
 */
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it } from 'vitest'
import { pauseTransport, releaseProbe, takeProbe } from '../src/dispatch/pause.ts'
import { FAKE_RESEND_URL } from './fake-resend.ts'
import { ADMIN_TOKEN, dispatchBatch, dispatchOnce, eventually, guid, runCron } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

type Row = { status: string; error_code: string | null; status_reason: string | null; send_attempts: number }
type Pause = { transport: string; code: string; failures: number; probe_at: string; probe_id: string | null }

async function pending(email: string, createdAt = new Date().toISOString()): Promise<string> {
  const id = `ntf_pause_${guid().replaceAll('-', '')}`
  await env.DB.prepare(
    `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
       recipient_email, locale, subject, text_body, html_body, status, scheduled_at, enqueued_at, created_at, updated_at)
     VALUES (?1, ?1, ?2, 'http', 'InvitationCreated', 'email', 'normal', ?3, ?4, 'ru', 'Тема', 'Текст', '<p>Текст</p>',
       'pending', ?5, ?5, ?5, ?5)`,
  )
    .bind(id, guid(), guid(), email, createdAt)
    .run()
  return id
}

const rowOf = (id: string) =>
  env.DB.prepare('SELECT status, error_code, status_reason, send_attempts FROM notifications WHERE id = ?1')
    .bind(id)
    .first<Row>()
const pauseOf = (transport: string) =>
  env.DB.prepare('SELECT * FROM transport_pauses WHERE transport = ?1').bind(transport).first<Pause>()
const deadLettersOf = async (id: string) =>
  (
    await env.DB.prepare('SELECT count(*) AS n FROM dead_letters WHERE body LIKE ?1')
      .bind(`%${id}%`)
      .first<{ n: number }>()
  )?.n

/** A stand-in for the send_email binding that refuses with a documented code, counting its calls. */
function refusing(code: string) {
  const calls: unknown[] = []
  const binding = {
    send: async (message: unknown) => {
      calls.push(message)
      throw Object.assign(new Error(`refused: ${code}`), { code })
    },
  } as unknown as SendEmail
  return { binding, calls }
}

const resendEnv = (key = 'test-resend-key') => ({
  EMAIL_TRANSPORT: 'resend',
  RESEND_API_KEY: key,
  RESEND_API_URL: FAKE_RESEND_URL,
})

afterEach(async () => {
  // A pause outlives its test otherwise, and would hold every later test's sends.
  await env.DB.prepare('DELETE FROM transport_pauses').run()
  await env.DB.prepare(
    "UPDATE notifications SET status = 'failed' WHERE id LIKE 'ntf_pause_%' AND status IN ('paused', 'pending')",
  ).run()
})

describe('a paused transport', () => {
  it('an unverified sender pauses the binding: the notification waits, the next is not tried, nothing fails', async () => {
    const earlier = new Date(Date.now() - 1000).toISOString()
    const first = await pending(`pause-a-${guid().slice(0, 8)}@example.com`, earlier)
    const { binding, calls } = refusing('E_SENDER_NOT_VERIFIED')
    const result = await dispatchOnce({ notificationId: first }, { EMAIL: binding })
    expect(result.explicitAcks).toHaveLength(1)
    expect(result.delays).toEqual([])
    expect(result.enqueued).toEqual([])
    expect(await rowOf(first)).toMatchObject({ status: 'paused', error_code: 'NTF_TRANSPORT_PAUSED', send_attempts: 0 })
    const pause = await pauseOf('cloudflare')
    expect(pause).toMatchObject({ code: 'E_SENDER_NOT_VERIFIED', failures: 1, probe_id: null })
    const probeIn = (Date.parse(pause?.probe_at as string) - Date.now()) / 1000
    expect(probeIn).toBeGreaterThan(25)
    expect(probeIn).toBeLessThanOrEqual(30)

    // The next notification is held by the claim itself: the binding is not even called.
    const second = await pending(`pause-b-${guid().slice(0, 8)}@example.com`)
    await dispatchOnce({ notificationId: second }, { EMAIL: binding })
    expect(calls).toHaveLength(1)
    expect(await rowOf(second)).toMatchObject({ status: 'paused', error_code: 'NTF_TRANSPORT_PAUSED' })
    expect((await rowOf(second))?.status_reason).toContain('E_SENDER_NOT_VERIFIED')
    expect(await deadLettersOf(first)).toBe(0)

    const metrics = await fetchWorker('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    expect(await metrics.text()).toContain(
      'notify_transport_paused{transport="cloudflare",code="E_SENDER_NOT_VERIFIED"} 1',
    )

    // Before the probe is due the cron releases nothing.
    await runCron(new Date())
    expect((await rowOf(first))?.status).toBe('paused')
    // Once due: one probe, the oldest; the other keeps waiting. The local binding accepts it, and the
    // accepted probe ends the pause and releases the rest, which the next cron run enqueues.
    await env.DB.prepare('UPDATE transport_pauses SET probe_at = ?1')
      .bind(new Date(Date.now() - 1).toISOString())
      .run()
    await runCron(new Date())
    expect((await pauseOf('cloudflare'))?.probe_id ?? 'resumed').toMatch(new RegExp(`${first}|resumed`))
    await eventually(async () => expect((await rowOf(first))?.status).toBe('sent'))
    expect(await pauseOf('cloudflare')).toBeNull()
    expect((await rowOf(second))?.status).toBe('pending')
    await runCron(new Date())
    await eventually(async () => expect((await rowOf(second))?.status).toBe('sent'))
    const after = await fetchWorker('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    expect(await after.text()).toContain('notify_transport_paused{transport="cloudflare",code=""} 0')
  })

  it('a refused probe waits twice as long; a quota waits until the time it names', async () => {
    const first = await pending(`pause-c-${guid().slice(0, 8)}@example.com`)
    const { binding } = refusing('E_SENDER_DOMAIN_NOT_AVAILABLE')
    await dispatchOnce({ notificationId: first }, { EMAIL: binding })
    expect(await pauseOf('cloudflare')).toMatchObject({ failures: 1 })
    // The probe, as the cron would release it, refused again.
    await env.DB.batch([
      env.DB.prepare('UPDATE transport_pauses SET probe_id = ?1').bind(first),
      env.DB.prepare("UPDATE notifications SET status = 'pending' WHERE id = ?1").bind(first),
    ])
    await dispatchOnce({ notificationId: first }, { EMAIL: binding })
    const twice = await pauseOf('cloudflare')
    expect(twice).toMatchObject({ failures: 2, probe_id: null })
    expect((Date.parse(twice?.probe_at as string) - Date.now()) / 1000).toBeGreaterThan(55)
    expect((await rowOf(first))?.status).toBe('paused')

    await env.DB.prepare('DELETE FROM transport_pauses').run()
    const quota = await pending(`pause-d-${guid().slice(0, 8)}@example.com`)
    await dispatchOnce({ notificationId: quota }, { EMAIL: refusing('E_DAILY_LIMIT_EXCEEDED').binding })
    const pause = await pauseOf('cloudflare')
    expect(pause?.code).toBe('E_DAILY_LIMIT_EXCEEDED')
    expect((Date.parse(pause?.probe_at as string) - Date.now()) / 1000).toBeGreaterThan(3590)
    expect(await rowOf(quota)).toMatchObject({ status: 'paused', send_attempts: 0 })
  })

  it('sends already in flight when the pause began are refused too, and do not push the next probe out', async () => {
    const now = new Date()
    const refused = (id: string) =>
      pauseTransport(env.DB, 'cloudflare', 'E_SENDER_NOT_VERIFIED', 'refused', now, null, id).run()
    await refused('ntf_in_flight_1')
    const first = await pauseOf('cloudflare')
    for (const id of ['ntf_in_flight_2', 'ntf_in_flight_3', 'ntf_in_flight_4']) await refused(id)
    expect(await pauseOf('cloudflare')).toMatchObject({ failures: 1, probe_at: first?.probe_at, probe_id: null })
  })

  it('resend: a wrong key pauses (403 invalid_api_key), and the probe with the fixed key resumes and releases the rest', async () => {
    const first = await pending(`pause-e-${guid().slice(0, 8)}@example.com`, new Date(Date.now() - 1000).toISOString())
    const second = await pending(`pause-f-${guid().slice(0, 8)}@example.com`)
    await dispatchOnce({ notificationId: first }, resendEnv('re_revoked_key'))
    expect(await pauseOf('resend')).toMatchObject({ code: 'invalid_api_key' })
    await dispatchOnce({ notificationId: second }, resendEnv())
    for (const id of [first, second]) expect((await rowOf(id))?.status).toBe('paused')
    // A probe still with the wrong key: refused again, the pause counts it.
    const third = await pending(`pause-g-${guid().slice(0, 8)}@example.com`)
    await env.DB.prepare('UPDATE transport_pauses SET probe_id = ?1').bind(third).run()
    await dispatchOnce({ notificationId: third }, resendEnv('re_revoked_key'))
    expect(await pauseOf('resend')).toMatchObject({ code: 'invalid_api_key', failures: 2 })

    // The key is fixed; the probe (the oldest) is released as the cron does — its statements, without
    // its enqueue, which this runtime's own consumer (the cloudflare transport) would race for — and accepted.
    const now = new Date().toISOString()
    await env.DB.prepare('UPDATE transport_pauses SET probe_at = ?1').bind(now).run()
    await env.DB.batch([
      takeProbe(env.DB, 'resend', now, new Date(Date.now() + 240_000).toISOString(), '["resend"]'),
      releaseProbe(env.DB, 'resend', now),
    ])
    const probe = (await pauseOf('resend'))?.probe_id
    expect(probe).toBe(first)
    const due = (await env.DB.prepare('SELECT scheduled_at FROM notifications WHERE id = ?1').bind(first).first()) as {
      scheduled_at: string
    }
    const accepted = await dispatchOnce({ notificationId: first, due: due.scheduled_at }, resendEnv())
    expect(accepted.explicitAcks).toHaveLength(1)
    expect((await rowOf(first))?.status).toBe('sent')
    expect(await pauseOf('resend')).toBeNull()
    for (const id of [second, third]) expect((await rowOf(id))?.status).toBe('pending')
    for (const id of [first, second, third]) expect(await deadLettersOf(id)).toBe(0)
  })

  it('paused notifications of a transport switched away from (or whose pause was removed by hand) are released', async () => {
    const id = await pending(`switched-${guid().slice(0, 8)}@example.com`)
    await dispatchOnce({ notificationId: id }, resendEnv('re_revoked_key'))
    expect((await rowOf(id))?.status).toBe('paused')
    // EMAIL_TRANSPORT is now cloudflare, which is not paused: the next cron run lets it go.
    await runCron(new Date())
    await eventually(async () => expect((await rowOf(id))?.status).toBe('sent'))
  })

  it('resend: a wrong RESEND_API_URL path (404) pauses; a sender name with a comma is quoted, not refused', async () => {
    const lost = await pending(`path-${guid().slice(0, 8)}@example.com`)
    await dispatchOnce({ notificationId: lost }, { ...resendEnv(), RESEND_API_URL: `${FAKE_RESEND_URL}/v2/` })
    expect(await rowOf(lost)).toMatchObject({ status: 'paused' })
    expect(await pauseOf('resend')).toMatchObject({ code: 'http-404' })
    await env.DB.prepare('DELETE FROM transport_pauses').run()
    const named = await pending(`named-${guid().slice(0, 8)}@example.com`)
    await dispatchOnce({ notificationId: named }, { ...resendEnv(), EMAIL_FROM_NAME: 'ArtHunt, Inc. "Notifications"' })
    expect((await rowOf(named))?.status).toBe('sent')
  })

  it('a send that may have gone out is not held by a pause: a dead claim through the binding waits as unknown', async () => {
    const { binding } = refusing('E_SENDER_NOT_VERIFIED')
    await dispatchOnce(
      { notificationId: await pending(`pause-h-${guid().slice(0, 8)}@example.com`) },
      { EMAIL: binding },
    )
    expect(await pauseOf('cloudflare')).toBeTruthy()
    const left = await pending(`left-${guid().slice(0, 8)}@example.com`)
    await env.DB.prepare(
      "UPDATE notifications SET status = 'sending', claim_token = 'crashed', lease_until = ?2, send_attempts = 1 WHERE id = ?1",
    )
      .bind(left, new Date(Date.now() - 1000).toISOString())
      .run()
    await dispatchOnce({ notificationId: left }, { EMAIL: binding })
    expect(await rowOf(left)).toMatchObject({ status: 'unknown', error_code: 'NTF_SEND_UNKNOWN' })
  })

  it('the provider fake refuses what Resend refuses: no User-Agent → 403 (1010); our requests carry one', async () => {
    const bare = await fetch(`${FAKE_RESEND_URL}/emails`, {
      method: 'POST',
      headers: { authorization: 'Bearer test-resend-key', 'content-type': 'application/json' },
      body: '{}',
    })
    expect(bare.status).toBe(403)
    expect(await bare.text()).toContain('1010')
    const id = await pending(`ua-${guid().slice(0, 8)}@example.com`)
    await dispatchOnce({ notificationId: id }, resendEnv())
    expect((await rowOf(id))?.status).toBe('sent')
  })
})

describe('each configured transport in /metrics', () => {
  const failover = {
    EMAIL_TRANSPORTS: 'cloudflare,resend',
    RESEND_API_KEY: 'test-resend-key',
    RESEND_API_URL: FAKE_RESEND_URL,
  }
  const scrape = async () =>
    (await fetchWorker('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }, failover)).text()
  /** The value of a series in a scrape, or undefined when it is not there. */
  const seriesValue = (text: string, series: string) => {
    const line = text.split('\n').find((found) => found.startsWith(`${series} `))
    return line === undefined ? undefined : Number(line.slice(series.length + 1))
  }
  const state = (transport: string, value: string) =>
    `notify_transport_state{transport="${transport}",state="${value}"}`
  const sent = (transport: string) => `notify_transport_sent_last_hour{transport="${transport}"}`

  it('a refusal pauses the first and the email goes out through the second: each one’s pause, state and last hour’s sends', async () => {
    const before = await scrape()
    expect(seriesValue(before, state('cloudflare', 'active'))).toBe(1)
    expect(seriesValue(before, state('resend', 'standby'))).toBe(1)
    for (const other of ['standby', 'paused', 'circuit-open'])
      expect(seriesValue(before, state('cloudflare', other))).toBe(0)
    expect(seriesValue(before, 'notify_transport_paused{transport="resend",code=""}')).toBe(0)
    const resendBefore = seriesValue(before, sent('resend')) as number
    const cloudflareBefore = seriesValue(before, sent('cloudflare')) as number
    expect(resendBefore).toBeGreaterThanOrEqual(0)

    const id = await pending(`metrics-${guid().slice(0, 8)}@example.com`)
    const { binding, calls } = refusing('E_SENDER_NOT_VERIFIED')
    // Refused for our configuration: the binding pauses, and the email is tried again at once, through resend.
    const refused = await dispatchBatch([{ notificationId: id }], { ...failover, EMAIL: binding }, 1, false)
    await dispatchBatch(
      refused.enqueued.map((message) => message.body),
      { ...failover, EMAIL: binding },
      1,
      false,
    )
    expect(calls).toHaveLength(1)
    expect(await env.DB.prepare('SELECT status, transport FROM notifications WHERE id = ?1').bind(id).first()).toEqual({
      status: 'sent',
      transport: 'resend',
    })

    const after = await scrape()
    expect(seriesValue(after, 'notify_transport_paused{transport="cloudflare",code="E_SENDER_NOT_VERIFIED"}')).toBe(1)
    expect(seriesValue(after, 'notify_transport_paused{transport="resend",code=""}')).toBe(0)
    expect(seriesValue(after, state('cloudflare', 'paused'))).toBe(1)
    expect(seriesValue(after, state('cloudflare', 'active'))).toBe(0)
    expect(seriesValue(after, state('resend', 'active'))).toBe(1)
    expect(seriesValue(after, sent('resend'))).toBe(resendBefore + 1)
    expect(seriesValue(after, sent('cloudflare'))).toBe(cloudflareBefore)
  })

  it('an open circuit is its own state; with both out no transport is active; one transport alone keeps its one line', async () => {
    const since = new Date().toISOString()
    await env.DB.prepare(
      `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
       VALUES ('resend', 'circuit-open', '5 or more failures in a row', ?1, 1, ?1, NULL, ?1)`,
    )
      .bind(since)
      .run()
    const open = await scrape()
    expect(seriesValue(open, state('resend', 'circuit-open'))).toBe(1)
    expect(seriesValue(open, 'notify_transport_paused{transport="resend",code="circuit-open"}')).toBe(1)
    expect(seriesValue(open, state('cloudflare', 'active'))).toBe(1)

    await pauseTransport(env.DB, 'cloudflare', 'E_DAILY_LIMIT_EXCEEDED', 'quota', new Date(), null, 'ntf_quota').run()
    const out = await scrape()
    for (const transport of ['cloudflare', 'resend']) expect(seriesValue(out, state(transport, 'active'))).toBe(0)
    expect(seriesValue(out, state('cloudflare', 'paused'))).toBe(1)

    // EMAIL_TRANSPORT alone: its pause line as before, and its state; another's pause is still said.
    const alone = await (await fetchWorker('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text()
    expect(seriesValue(alone, 'notify_transport_paused{transport="cloudflare",code="E_DAILY_LIMIT_EXCEEDED"}')).toBe(1)
    expect(seriesValue(alone, 'notify_transport_paused{transport="resend",code="circuit-open"}')).toBe(1)
    expect(seriesValue(alone, state('cloudflare', 'paused'))).toBe(1)
    expect(alone).not.toContain('notify_transport_state{transport="resend"')
  })
})

describe("the binding's documented limits, before sending", () => {
  it('a subject over 998 characters is not sent: NTF_MESSAGE_INVALID, failed, a dead letter naming the limit', async () => {
    const id = await pending(`long-${guid().slice(0, 8)}@example.com`)
    await env.DB.prepare('UPDATE notifications SET subject = ?2 WHERE id = ?1').bind(id, 'Я'.repeat(999)).run()
    const calls: unknown[] = []
    const accepting = {
      send: async (message: unknown) => {
        calls.push(message)
        return { messageId: 'never' }
      },
    } as unknown as SendEmail
    const result = await dispatchOnce({ notificationId: id }, { EMAIL: accepting })
    expect(result.explicitAcks).toHaveLength(1)
    expect(calls).toHaveLength(0)
    expect(await rowOf(id)).toMatchObject({ status: 'failed', error_code: 'NTF_MESSAGE_INVALID' })
    expect((await rowOf(id))?.status_reason).toContain('998')
    await eventually(async () => {
      const dead = await env.DB.prepare('SELECT code FROM dead_letters WHERE body LIKE ?1').bind(`%${id}%`).first()
      expect(dead).toEqual({ code: 'NTF_MESSAGE_INVALID' })
    })
  })
})
