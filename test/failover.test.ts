/**
 * Provider failover (EMAIL_TRANSPORTS): mail goes through the first usable
 * transport and fails over to the next only when the first certainly did not
 * send — refused for our configuration, or never tried because it is paused
 * or its circuit open. One that may have gone out stays with its transport,
 * and goes elsewhere only after that transport's delivery events had their
 * chance. Each provider is its stand-in, keeping its documented contract:
 * the send_email binding (test/model/binding-stand-in.ts) and Resend's API
 * (test/fake-resend.ts). Every step is driven here: the consumer's messages
 * are recorded, not left to this runtime's own consumer.
 */
import { env } from 'cloudflare:workers'
import { Webhook } from 'svix'
import { afterEach, describe, expect, it } from 'vitest'
import { FAKE_RESEND_TEAM_KEY_PREFIX, FAKE_RESEND_URL } from './fake-resend.ts'
import { adminCall, consoleAnswer, type DispatchOutcome, dispatchBatch, eventually, guid, runCron } from './helpers.ts'
import { BindingStandIn } from './model/binding-stand-in.ts'
import { fetchWorker } from './worker-fetch.ts'

type Row = {
  id: string
  status: string
  transport: string | null
  failover_from: string | null
  maybe_sent_at: string | null
  batch_id: string | null
  send_attempts: number
  scheduled_at: string
  status_reason: string | null
}
type Pause = { transport: string; code: string; failures: number; probe_at: string; probe_id: string | null }

const WEBHOOK_SECRET = 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ='

/** The send_email binding's stand-in, counting every call (accepted or refused). */
function binding() {
  const standIn = new BindingStandIn()
  let calls = 0
  const send = standIn.send.bind(standIn)
  standIn.send = (message) => {
    calls += 1
    return send(message)
  }
  return { standIn, calls: () => calls }
}

/** The variables of a Worker with both transports in `order`, the binding's stand-in and Resend's. */
function transports(order: string, standIn: BindingStandIn, overrides: Record<string, string> = {}) {
  return {
    EMAIL_TRANSPORTS: order,
    RESEND_API_KEY: 'test-resend-key',
    RESEND_API_URL: FAKE_RESEND_URL,
    EMAIL: standIn,
    ...overrides,
  }
}

/** Pending emails due now, one per address, as materialize writes them; created a millisecond apart, in order. */
async function pending(...addresses: string[]): Promise<string[]> {
  const start = Date.now() - addresses.length
  const ids = addresses.map(() => `ntf_test_${guid().replaceAll('-', '')}`)
  await env.DB.batch(
    ids.map((id, index) => {
      const at = new Date(start + index).toISOString()
      return env.DB.prepare(
        `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency,
           recipient_user_id, recipient_email, recipient_name, locale, time_zone, subject, text_body, html_body,
           template_version, status, scheduled_at, enqueued_at, created_at, updated_at, unsubscribe_url)
         VALUES (?1, ?2, ?3, 'http', 'InvitationCreated', 'email', 'normal', ?4, ?5, 'Михаил', 'ru',
           'Europe/Moscow', 'Вас пригласили в проект', 'Текст', '<p>Текст</p>', 1, 'pending', ?6, ?6, ?6, ?6,
           'https://notify-edge.example.workers.dev/u/' || ?1)`,
      ).bind(id, `test:${id}`, guid(), guid(), addresses[index], at)
    }),
  )
  return ids
}

const address = (local: string) => `${local}-${guid().slice(0, 8)}@example.com`

async function rows(ids: readonly string[]): Promise<Row[]> {
  const { results } = await env.DB.prepare('SELECT * FROM notifications WHERE id IN (SELECT value FROM json_each(?1))')
    .bind(JSON.stringify(ids))
    .all<Row>()
  return ids.map((id) => results.find((row) => row.id === id) as Row)
}

const pauseOf = (transport: string) =>
  env.DB.prepare('SELECT * FROM transport_pauses WHERE transport = ?1').bind(transport).first<Pause>()

/** Emails the Resend stand-in accepted under an Idempotency-Key (a notification id, or a batch id). */
async function resendEmails(key: string): Promise<number> {
  return ((await (await fetch(`${FAKE_RESEND_URL}/control/emails?key=${key}`)).json()) as { count: number }).count
}

/** Delivers these messages as one batch under `overrides`, recording what it enqueues instead of sending it on. */
function drive(messages: readonly { notificationId: string; due?: string }[], overrides: Record<string, unknown>) {
  return dispatchBatch([...messages], overrides, 1, false)
}

const ids = (ids: readonly string[]) => ids.map((notificationId) => ({ notificationId }))

/** Makes these notifications due now: the test's clock moving to their retry time (or to the cron's, after it). */
async function dueNow(ids: readonly string[]): Promise<void> {
  await env.DB.prepare('UPDATE notifications SET scheduled_at = ?2 WHERE id IN (SELECT value FROM json_each(?1))')
    .bind(JSON.stringify(ids), new Date().toISOString())
    .run()
}
const next = (outcome: DispatchOutcome) => outcome.enqueued.map((message) => message.body)

/** The cron, as of `at`, with its enqueues recorded instead of sent (`messages`). */
async function cron(at: Date, overrides: Record<string, unknown>) {
  const messages: { notificationId: string }[] = []
  const record = async (bodies: Iterable<MessageSendRequest>) => {
    for (const { body } of bodies) messages.push(body as { notificationId: string })
  }
  await runCron(at, {
    ...overrides,
    DISPATCH: { send: (body: unknown) => record([{ body }]), sendBatch: record },
  })
  return messages
}

/** Posts a webhook signed as Resend (Svix) signs it. */
async function resendWebhook(event: unknown): Promise<Response> {
  const id = `msg_${guid().replaceAll('-', '')}`
  const at = new Date()
  const payload = JSON.stringify(event)
  return fetchWorker('/v1/webhooks/resend', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'svix-id': id,
      'svix-timestamp': String(Math.floor(at.getTime() / 1000)),
      'svix-signature': new Webhook(WEBHOOK_SECRET).sign(id, at, payload),
    },
    body: payload,
  })
}

/** A Resend delivery event about an email, carrying our notification header as Resend echoes custom headers. */
function resendEvent(type: string, emailId: string, to: string, notificationId: string | null) {
  return {
    type,
    created_at: new Date().toISOString(),
    data: {
      email_id: emailId,
      created_at: new Date().toISOString(),
      from: 'notify-edge <notifications@notify-edge.example>',
      to: [to],
      subject: 'Вас пригласили в проект',
      ...(notificationId ? { headers: [{ name: 'X-Notify-Edge-Notification', value: notificationId }] } : {}),
    },
  }
}

/**
 * An email Resend took with the answer lost: sent through resend, then tried again under a revoked key, it
 * waits `unknown` for Resend's events before the binding may send it (`failover_from`). With `cancellationKey`,
 * the email carries that key.
 */
async function waitingToLeaveResend(local: string, cancellationKey?: string) {
  const { standIn, calls } = binding()
  const vars = transports('resend,cloudflare', standIn, { RESEND_BATCH_SIZE: '1' })
  const [id = ''] = await pending(address(local))
  if (cancellationKey !== undefined) {
    await env.DB.prepare('UPDATE notifications SET cancellation_key = ?2 WHERE id = ?1').bind(id, cancellationKey).run()
  }
  await drive(ids([id]), vars)
  expect(await resendEmails(id)).toBe(1)
  await dueNow([id])
  const revoked = { ...vars, RESEND_API_KEY: 'test-resend-key-revoked' }
  await drive(next(await drive(ids([id]), revoked)), revoked)
  const [waiting] = await rows([id])
  expect(waiting).toMatchObject({ status: 'unknown', failover_from: 'resend' })
  return { id, standIn, calls, revoked, waiting }
}

afterEach(async () => {
  // A pause or a circuit outlives its test otherwise, and would steer every later test's sends.
  await env.DB.batch([env.DB.prepare('DELETE FROM transport_pauses'), env.DB.prepare('DELETE FROM transport_failures')])
})

describe('failover between cloudflare and resend', () => {
  it("a quota on the first: the rest of the day's mail goes through the second, and back once the quota's time came", async () => {
    const { standIn, calls } = binding()
    standIn.dailyLimit = true
    const vars = transports('cloudflare,resend', standIn, { RESEND_BATCH_SIZE: '1' })
    const [first, second, third] = await pending(address('daily-a'), address('daily-b'), address('daily-c'))
    const refused = await drive(ids([first as string]), vars)
    // Refused for the account's quota: nothing was sent, and it goes at once through the next transport.
    expect(calls()).toBe(1)
    expect(next(refused)).toEqual([{ notificationId: first, due: expect.any(String) }])
    const pause = await pauseOf('cloudflare')
    expect(pause).toMatchObject({ code: 'E_DAILY_LIMIT_EXCEEDED', failures: 1 })
    // Not before the time the binding's code stands for (an hour).
    expect(Date.parse(pause?.probe_at as string) - Date.now()).toBeGreaterThan(3_500_000)
    await drive(next(refused), vars)
    await drive(ids([second as string, third as string]), vars)
    // The rest went through resend: the binding was not asked again.
    expect(calls()).toBe(1)
    expect((await rows([first, second, third] as string[])).map((row) => [row.status, row.transport])).toEqual([
      ['sent', 'resend'],
      ['sent', 'resend'],
      ['sent', 'resend'],
    ])
    for (const id of [first, second, third] as string[]) expect(await resendEmails(id)).toBe(1)
    expect(standIn.emails).toHaveLength(0)

    // The quota's time came: the next claim names one email as the probe, through the binding; accepted,
    // it ends the pause, and mail goes through the first transport again.
    standIn.dailyLimit = false
    await env.DB.prepare("UPDATE transport_pauses SET probe_at = ?1 WHERE transport = 'cloudflare'")
      .bind(new Date(Date.now() - 1000).toISOString())
      .run()
    const [probe, beside] = await pending(address('daily-d'), address('daily-e'))
    await drive(ids([probe as string, beside as string]), vars)
    expect(standIn.emails.map((email) => email.notificationId)).toEqual([probe])
    expect(await pauseOf('cloudflare')).toBeNull()
    // The other was claimed while the pause stood: resend took it, once.
    expect((await rows([beside as string]))[0]).toMatchObject({ status: 'sent', transport: 'resend' })
    const [later] = await pending(address('daily-f'))
    await drive(ids([later as string]), vars)
    expect((await rows([probe, later] as string[])).map((row) => [row.status, row.transport])).toEqual([
      ['sent', 'cloudflare'],
      ['sent', 'cloudflare'],
    ])
    expect(await resendEmails(probe as string)).toBe(0)
    expect(await resendEmails(later as string)).toBe(0)
    // The same message whichever sent it: the unsubscribe headers of the row each keeps.
    const kept = await env.DB.prepare(
      'SELECT notification_id, raw FROM sent_messages WHERE notification_id IN (?1, ?2) ORDER BY notification_id',
    )
      .bind(first, later)
      .all<{ notification_id: string; raw: string }>()
    for (const { notification_id, raw } of kept.results) {
      expect(raw).toContain(`List-Unsubscribe: <https://notify-edge.example.workers.dev/u/${notification_id}>`)
      expect(raw).toContain('List-Unsubscribe-Post: List-Unsubscribe=One-Click')
    }
    expect(kept.results).toHaveLength(2)
  })

  it('a key revoked on the first while a batch answer was lost: the batch waits for its events, nothing goes twice', async () => {
    const { standIn, calls } = binding()
    const vars = transports('resend,cloudflare', standIn)
    const addresses = [address('lostanswer-a'), address('lostanswer-b'), address('lostanswer-c')]
    const batch = await pending(...addresses)
    // One request for the three, which Resend took; its answer was lost on the way back.
    await drive(ids(batch), vars)
    const lost = await rows(batch)
    expect(lost.every((row) => row.status === 'pending' && row.maybe_sent_at !== null)).toBe(true)
    const batchId = lost[0]?.batch_id as string
    expect(batchId).toBeTruthy()
    expect(await resendEmails(batchId)).toBe(3)

    // Its retry comes with the key revoked: Resend refuses the request itself (403), and the transport pauses.
    await dueNow(batch)
    const revoked = { ...vars, RESEND_API_KEY: 'test-resend-key-revoked' }
    const refused = await drive(ids(batch), revoked)
    expect((await pauseOf('resend'))?.code).toBe('invalid_api_key')
    // The refusal says nothing of the first request: they may have gone out, so they wait for resend's
    // delivery events instead of going through the binding.
    await drive(next(refused), revoked)
    const waiting = await rows(batch)
    expect(waiting.map((row) => [row.status, row.failover_from])).toEqual([
      ['unknown', 'resend'],
      ['unknown', 'resend'],
      ['unknown', 'resend'],
    ])
    expect(calls()).toBe(0)

    // Resend reports them: each is settled as sent through resend, and nothing else goes.
    for (const [index, id] of batch.entries()) {
      const answer = await resendWebhook(
        resendEvent('email.delivered', `re_${batchId}_${index}`, addresses[index] as string, id),
      )
      expect(answer.status).toBe(202)
    }
    await eventually(async () => expect((await rows(batch)).every((row) => row.status === 'sent')).toBe(true))
    const afterWait = new Date(Date.now() + 3_600_000)
    const mine = (messages: { notificationId: string }[]) => messages.filter((m) => batch.includes(m.notificationId))
    expect(mine(await cron(afterWait, revoked))).toEqual([])
    expect((await rows(batch)).map((row) => [row.status, row.transport])).toEqual([
      ['sent', 'resend'],
      ['sent', 'resend'],
      ['sent', 'resend'],
    ])
    expect(calls()).toBe(0)
    expect(await resendEmails(batchId)).toBe(3)
  })

  it('one that may have gone out and whose events never come goes through the next transport only after the wait', async () => {
    const { id, standIn, calls, revoked, waiting } = await waitingToLeaveResend('lostanswer-alone')
    // Before its time, the cron leaves it waiting.
    expect((await cron(new Date(), revoked)).filter((m) => m.notificationId === id)).toEqual([])
    expect((await rows([id as string]))[0]?.status).toBe('unknown')
    // After it, with no event from resend, it is taken as not sent there and goes through the binding.
    const decided = new Date(Date.parse(waiting?.scheduled_at as string) + 1000)
    await cron(decided, revoked)
    await dueNow([id as string])
    const freed = (await rows([id as string]))[0]
    expect(freed).toMatchObject({ status: 'pending', maybe_sent_at: null, failover_from: 'resend' })
    expect(freed?.status_reason).toContain('no delivery event came from resend')
    await drive(ids([id as string]), revoked)
    expect((await rows([id as string]))[0]).toMatchObject({ status: 'sent', transport: 'cloudflare' })
    expect(calls()).toBe(1)
    expect(standIn.emailsOf(id as string)).toHaveLength(1)
  })

  it('one cancelled after its try through resend was taken as not sent ends cancelled, its reason saying that try may have gone', async () => {
    const key = `invitation:${guid()}`
    const { id, calls, revoked, waiting } = await waitingToLeaveResend('lostanswer-cancelled', key)
    await cron(new Date(Date.parse(waiting?.scheduled_at as string) + 1000), revoked)
    expect((await rows([id as string]))[0]).toMatchObject({ status: 'pending', maybe_sent_at: null })
    const cancelled = await adminCall<{
      notifications: { id: string; outcome: string; unconfirmedThrough: string[] }[]
    }>('POST', '/v1/cancellations', { key })
    expect(cancelled.status).toBe(200)
    // The answer says it too: an operator who reads only the report learns that resend may have sent it.
    expect(cancelled.body.notifications).toMatchObject([{ id, outcome: 'cancelled', unconfirmedThrough: ['resend'] }])
    // And so does the console's confirmation, which asks the same route (said again, it answers the same).
    const confirmed = await consoleAnswer(
      `/console/cancellations?key=${encodeURIComponent(key)}`,
      { key },
      '/console/cancellations',
    )
    expect(confirmed.status).toBe(200)
    expect(confirmed.html.replace(/<[^>]+>/g, ' ')).toMatch(
      /cancelled\s+cancelled; a try through resend may have gone out/,
    )
    const [row] = await rows([id as string])
    expect(row?.status).toBe('cancelled')
    // Resend accepted it once: the operator reading this row learns that, instead of a plain "cancelled".
    expect(row?.status_reason).toBe(
      `cancelled by an operator (${key}); a try through resend may have gone out: no delivery event came from it, so it is taken as not sent`,
    )
    await dueNow([id as string])
    await drive(ids([id as string]), revoked)
    expect(calls()).toBe(0)
  })

  it('one taken as not sent through resend, then lost through the binding and cancelled in flight: a later cancellation names both', async () => {
    const key = `invitation:${guid()}`
    const { id, standIn, revoked, waiting } = await waitingToLeaveResend('lostanswer-twice', key)
    await cron(new Date(Date.parse(waiting?.scheduled_at as string) + 1000), revoked)
    await dueNow([id])
    // The binding takes it and its answer is lost: it waits for the binding's delivery event.
    standIn.script.push('lose-after-accept')
    await drive(ids([id]), revoked)
    const [unknown] = await rows([id])
    expect(unknown).toMatchObject({ status: 'unknown', transport: 'cloudflare' })
    expect(standIn.emailsOf(id)).toHaveLength(1)
    const cancel = () =>
      adminCall<{ notifications: { id: string; outcome: string; unconfirmedThrough: string[] }[] }>(
        'POST',
        '/v1/cancellations',
        { key },
      )
    expect((await cancel()).body.notifications).toMatchObject([
      { id, outcome: 'in-flight', unconfirmedThrough: ['resend'] },
    ])
    // No event from the binding either: taken as not sent, it ends cancelled, and is not sent again.
    await cron(new Date(Date.parse(unknown?.scheduled_at as string) + 1000), revoked)
    const [ended] = await rows([id])
    expect(ended?.status).toBe('cancelled')
    // Either provider may have sent it: the answer names both, not only the first.
    expect((await cancel()).body.notifications).toMatchObject([
      { id, outcome: 'cancelled', unconfirmedThrough: ['resend', 'cloudflare'] },
    ])
  })

  it('a 5xx storm opens the circuit: mail goes through the second, and the circuit closes on an accepted probe', async () => {
    const { standIn } = binding()
    const key = `${FAKE_RESEND_TEAM_KEY_PREFIX}storm-${guid().slice(0, 8)}`
    const vars = transports('resend,cloudflare', standIn, {
      RESEND_API_KEY: key,
      RESEND_BATCH_SIZE: '1',
      CIRCUIT_FAILURES: '3',
    })
    await fetch(`${FAKE_RESEND_URL}/control/outage?key=${key}&on=1`, { method: 'POST' })
    const stormed = await pending(address('storm-a'), address('storm-b'), address('storm-c'))
    for (const id of stormed) {
      expect(await pauseOf('resend')).toBeNull()
      await drive(ids([id]), vars)
    }
    // Three 503s in a row: the circuit is open.
    expect(await pauseOf('resend')).toMatchObject({ code: 'circuit-open', failures: 1 })
    const [during] = await pending(address('storm-d'))
    await drive(ids([during as string]), vars)
    expect((await rows([during as string]))[0]).toMatchObject({ status: 'sent', transport: 'cloudflare' })
    // Those the storm failed may have gone out (a 5xx): they wait for resend's events, not the binding.
    await dueNow(stormed)
    await drive(ids(stormed), vars)
    expect((await rows(stormed)).map((row) => [row.status, row.failover_from])).toEqual([
      ['unknown', 'resend'],
      ['unknown', 'resend'],
      ['unknown', 'resend'],
    ])
    expect(standIn.emails.map((email) => email.notificationId)).toEqual([during])

    // Resend answers again; its probe is due: one email goes through it, accepted, and the circuit closes.
    await fetch(`${FAKE_RESEND_URL}/control/outage?key=${key}&on=0`, { method: 'POST' })
    await env.DB.prepare("UPDATE transport_pauses SET probe_at = ?1 WHERE transport = 'resend'")
      .bind(new Date(Date.now() - 1000).toISOString())
      .run()
    const [probe] = await pending(address('storm-e'))
    await drive(ids([probe as string]), vars)
    expect((await rows([probe as string]))[0]).toMatchObject({ status: 'sent', transport: 'resend' })
    expect(await pauseOf('resend')).toBeNull()
    expect(await env.DB.prepare('SELECT * FROM transport_failures').first()).toBeNull()
    // With no event from resend in their time, the stormed ones go again — through resend, usable first again,
    // under their own keys: the storm's 503s had taken nothing, so each is one email.
    const decided = new Date(Date.parse((await rows(stormed))[0]?.scheduled_at as string) + 1000)
    await cron(decided, vars)
    await dueNow(stormed)
    await drive(ids(stormed), vars)
    expect((await rows(stormed)).map((row) => [row.status, row.transport])).toEqual([
      ['sent', 'resend'],
      ['sent', 'resend'],
      ['sent', 'resend'],
    ])
    for (const id of stormed) expect(await resendEmails(id)).toBe(1)
    expect(standIn.emails.map((email) => email.notificationId)).toEqual([during])
  })

  it('a complaint reported by resend suppresses a send through cloudflare', async () => {
    const { standIn, calls } = binding()
    const to = address('complains')
    const answer = await resendWebhook(resendEvent('email.complained', `re_${guid()}`, to, null))
    expect(answer.status).toBe(202)
    await eventually(async () =>
      expect(await env.DB.prepare('SELECT 1 FROM suppressions WHERE address = ?1').bind(to).first()).not.toBeNull(),
    )
    const [id] = await pending(to)
    await drive(ids([id as string]), transports('cloudflare,resend', standIn))
    expect((await rows([id as string]))[0]?.status).toBe('suppressed')
    expect(calls()).toBe(0)
  })

  it("an event of the other provider about a notification's Message-ID settles nothing of it", async () => {
    const { standIn } = binding()
    const vars = transports('resend,cloudflare', standIn, { RESEND_BATCH_SIZE: '1' })
    const to = address('other-provider')
    const [id] = await pending(to)
    await drive(ids([id as string]), vars)
    expect((await rows([id as string]))[0]).toMatchObject({ status: 'sent', transport: 'resend' })
    // The binding's event subscription names the same Message-ID (the same whichever provider sends).
    const messageId = (
      await env.DB.prepare('SELECT message_id FROM sent_messages WHERE notification_id = ?1')
        .bind(id)
        .first<{ message_id: string }>()
    )?.message_id as string
    const { cloudflareEvent } = await import('./email-events.ts')
    await env.EMAIL_EVENTS.send(cloudflareEvent('deferred', messageId, to))
    await eventually(async () => {
      const recorded = await env.DB.prepare(
        "SELECT notification_id FROM delivery_events WHERE provider = 'cloudflare' AND provider_message_id = ?1",
      )
        .bind(messageId.replace(/^<|>$/g, ''))
        .first<{ notification_id: string | null }>()
      expect(recorded).toEqual({ notification_id: null })
    }, 60_000)
    const after = await env.DB.prepare('SELECT delivery_status FROM notifications WHERE id = ?1')
      .bind(id)
      .first<{ delivery_status: string | null }>()
    expect(after?.delivery_status).toBeNull()
  })

  it('a fresh batch refused for the key: its members leave it and go one by one through the binding', async () => {
    const { standIn } = binding()
    const vars = transports('resend,cloudflare', standIn, { RESEND_API_KEY: 'test-resend-key-revoked' })
    const batch = await pending(address('bundled-a'), address('bundled-b'), address('bundled-c'))
    const refused = await drive(ids(batch), vars)
    expect((await pauseOf('resend'))?.code).toBe('invalid_api_key')
    expect((await rows(batch)).every((row) => row.status === 'pending' && row.batch_id === null)).toBe(true)
    await drive(next(refused), vars)
    expect((await rows(batch)).map((row) => [row.status, row.transport, row.send_attempts])).toEqual([
      ['sent', 'cloudflare', 1],
      ['sent', 'cloudflare', 1],
      ['sent', 'cloudflare', 1],
    ])
    expect(standIn.emails.map((email) => email.notificationId).sort()).toEqual([...batch].sort())
  })

  it("a batch's members routed to the binding while resend is paused leave the batch and go alone", async () => {
    const { standIn } = binding()
    const vars = transports('resend,cloudflare', standIn)
    const batch = await pending(address('stray-a'), address('stray-b'))
    // A batch made earlier (its request never went: the pace had no slot), then resend paused.
    const batchId = `bat_${guid().replaceAll('-', '')}`
    const now = new Date().toISOString()
    await env.DB.batch([
      env.DB.prepare("INSERT INTO send_batches (id, transport, size, created_at) VALUES (?1, 'resend', 2, ?2)").bind(
        batchId,
        now,
      ),
      ...batch.map((id, position) =>
        env.DB.prepare('UPDATE notifications SET batch_id = ?2, batch_position = ?3 WHERE id = ?1').bind(
          id,
          batchId,
          position,
        ),
      ),
      env.DB.prepare(
        `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
         VALUES ('resend', 'invalid_api_key', 'key revoked', ?1, 1, ?2, NULL, ?1)`,
      ).bind(now, new Date(Date.now() + 3_600_000).toISOString()),
    ])
    await drive(ids(batch), vars)
    expect((await rows(batch)).map((row) => [row.status, row.transport, row.batch_id])).toEqual([
      ['sent', 'cloudflare', null],
      ['sent', 'cloudflare', null],
    ])
    expect(await resendEmails(batchId)).toBe(0)
    expect(standIn.emails).toHaveLength(2)
  })

  it('a refusal about the message does not fail over: it fails where it was sent', async () => {
    const { standIn, calls } = binding()
    const vars = transports('resend,cloudflare', standIn, { RESEND_BATCH_SIZE: '1' })
    const [id] = await pending(address('permanent'))
    const outcome = await drive(ids([id as string]), vars)
    expect(next(outcome)).toEqual([])
    expect((await rows([id as string]))[0]).toMatchObject({ status: 'failed', transport: 'resend' })
    expect(await pauseOf('resend')).toBeNull()
    expect(calls()).toBe(0)
  })

  it('both down: emails wait paused; the first probe accepted, through either, releases them', async () => {
    const { standIn, calls } = binding()
    standIn.unverified = true
    const revoked = transports('cloudflare,resend', standIn, {
      RESEND_API_KEY: 'test-resend-key-revoked',
      RESEND_BATCH_SIZE: '1',
    })
    const [first, second] = await pending(address('both-a'), address('both-b'))
    // Refused by the binding, then by resend: both paused, and the email waits.
    const once = await drive(ids([first as string]), revoked)
    const twice = await drive(next(once), revoked)
    // Tried again at once; its claim finds no transport usable and holds it.
    expect(await drive(next(twice), revoked).then(next)).toEqual([])
    expect((await rows([first as string]))[0]?.status).toBe('paused')
    expect((await pauseOf('cloudflare'))?.code).toBe('E_SENDER_NOT_VERIFIED')
    expect((await pauseOf('resend'))?.code).toBe('invalid_api_key')
    await drive(ids([second as string]), revoked)
    expect((await rows([second as string]))[0]?.status).toBe('paused')
    expect(calls()).toBe(1)

    // Resend's key is fixed and its probe is due (the binding's is not): the cron releases one probe for it.
    const fixed = transports('cloudflare,resend', standIn, { RESEND_BATCH_SIZE: '1' })
    await env.DB.prepare("UPDATE transport_pauses SET probe_at = ?1 WHERE transport = 'resend'")
      .bind(new Date(Date.now() - 1000).toISOString())
      .run()
    await env.DB.prepare("UPDATE transport_pauses SET probe_at = ?1 WHERE transport = 'cloudflare'")
      .bind(new Date(Date.now() + 3_600_000).toISOString())
      .run()
    const probes = (await cron(new Date(), fixed)).filter(
      (m) => m.notificationId === first || m.notificationId === second,
    )
    expect(probes).toEqual([expect.objectContaining({ notificationId: first })])
    await drive(probes, fixed)
    expect((await rows([first as string]))[0]).toMatchObject({ status: 'sent', transport: 'resend' })
    expect(await pauseOf('resend')).toBeNull()
    // The rest is released, and goes through resend: the binding is still paused.
    expect((await rows([second as string]))[0]?.status).toBe('pending')
    await dueNow([second as string])
    await drive(ids([second as string]), fixed)
    expect((await rows([second as string]))[0]).toMatchObject({ status: 'sent', transport: 'resend' })
    expect(calls()).toBe(1)
    expect(standIn.emails).toHaveLength(0)
  })
})

describe('where failover meets earlier tries', () => {
  /** A pause of `transport` (an open circuit) whose probe is not due. */
  const pause = (transport: string) =>
    env.DB.prepare(
      `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
       VALUES (?1, 'circuit-open', 'a test', ?2, 1, '2999-01-01T00:00:00.000Z', NULL, ?2)`,
    )
      .bind(transport, new Date().toISOString())
      .run()
  const unpause = (transport: string) =>
    env.DB.prepare('DELETE FROM transport_pauses WHERE transport = ?1').bind(transport).run()
  const one = async (id: string) => (await rows([id]))[0] as Row
  const past = (row: Row) => new Date(Date.parse(row.scheduled_at) + 1000)

  it('a failover that went on and then met an unknown outcome of its own stays with the transport it went to', async () => {
    const { standIn } = binding()
    const key = `${FAKE_RESEND_TEAM_KEY_PREFIX}twice-${guid().slice(0, 8)}`
    const vars = transports('resend,cloudflare', standIn, { RESEND_API_KEY: key, RESEND_BATCH_SIZE: '1' })
    const [id] = (await pending(address('twice'))) as [string]
    await fetch(`${FAKE_RESEND_URL}/control/outage?key=${key}&on=1`, { method: 'POST' })
    await drive(ids([id]), vars)
    await fetch(`${FAKE_RESEND_URL}/control/outage?key=${key}&on=0`, { method: 'POST' })
    await pause('resend')
    await dueNow([id])
    await drive(ids([id]), vars)
    expect(await one(id)).toMatchObject({ status: 'unknown', failover_from: 'resend' })
    await cron(past(await one(id)), vars)
    await dueNow([id])
    // Through the binding now, which takes the message and answers an internal error: unknown, through it.
    standIn.script.push('internal-after-accept')
    await drive(ids([id]), vars)
    const unknown = await one(id)
    expect(unknown).toMatchObject({ status: 'unknown', transport: 'cloudflare', failover_from: null })
    // Resend is back and first again; the binding's wait ends with no event: sent again through the binding,
    // never through resend.
    await unpause('resend')
    await cron(past(unknown), vars)
    await dueNow([id])
    await drive(ids([id]), vars)
    expect(await one(id)).toMatchObject({ status: 'sent', transport: 'cloudflare' })
    expect(await resendEmails(id)).toBe(0)
  })

  it("a lost answer through the next transport, past its key's window, is a dead letter: the earlier failover frees nothing", async () => {
    const { standIn } = binding()
    const vars = transports('cloudflare,resend', standIn, { RESEND_BATCH_SIZE: '1' })
    const [id] = (await pending(address('lostanswer-window'))) as [string]
    standIn.script.push('internal-before-accept')
    await drive(ids([id]), vars)
    await cron(past(await one(id)), vars)
    await pause('cloudflare')
    await dueNow([id])
    await drive(ids([id]), vars)
    expect(await one(id)).toMatchObject({ status: 'unknown', failover_from: 'cloudflare' })
    await cron(past(await one(id)), vars)
    await dueNow([id])
    // Resend takes it and the answer is lost; its retry would come 25 hours later, past the key's window.
    await drive(ids([id]), vars)
    expect(await one(id)).toMatchObject({ status: 'pending', transport: 'resend' })
    const old = new Date(Date.now() - 25 * 3_600_000).toISOString()
    await env.DB.prepare('UPDATE notifications SET maybe_sent_at = ?2, claimed_at = ?2 WHERE id = ?1')
      .bind(id, old)
      .run()
    await dueNow([id])
    await drive(ids([id]), vars)
    const waiting = await one(id)
    expect(waiting.status).toBe('unknown')
    await cron(past(waiting), vars)
    expect(await one(id)).toMatchObject({ status: 'failed' })
    expect(standIn.emailsOf(id)).toHaveLength(0)
    expect(await resendEmails(id)).toBe(1)
  })

  it('one transport, switched from resend: a send through resend whose lease ran out waits for its events', async () => {
    const { standIn } = binding()
    const [id] = (await pending(address('switched'))) as [string]
    const old = new Date(Date.now() - 600_000).toISOString()
    await env.DB.prepare(
      `UPDATE notifications SET status = 'sending', claimed_at = ?2, lease_until = ?2, send_attempts = 1,
         transport = 'resend', claim_token = 'a-claim-long-gone' WHERE id = ?1`,
    )
      .bind(id, old)
      .run()
    await drive(ids([id]), { EMAIL_TRANSPORT: 'cloudflare', EMAIL: standIn })
    expect(await one(id)).toMatchObject({ status: 'unknown' })
    expect(standIn.emails).toHaveLength(0)
  })

  it("the binding's probe taken from a batch made for resend is one request, not one per member", async () => {
    const { standIn, calls } = binding()
    standIn.dailyLimit = true
    const vars = transports('cloudflare,resend', standIn)
    const members = await pending(address('probe-a'), address('probe-b'), address('probe-c'), address('probe-d'))
    const batchId = `bat_${guid().replaceAll('-', '')}`
    const now = new Date().toISOString()
    await env.DB.batch([
      env.DB.prepare("INSERT INTO send_batches (id, transport, size, created_at) VALUES (?1, 'resend', 4, ?2)").bind(
        batchId,
        now,
      ),
      ...members.map((id, position) =>
        env.DB.prepare(
          `UPDATE notifications SET status = 'paused', batch_id = ?2, batch_position = ?3, transport = 'resend',
             send_attempts = 0 WHERE id = ?1`,
        ).bind(id, batchId, position),
      ),
      ...['cloudflare', 'resend'].map((transport) =>
        env.DB.prepare(
          `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
           VALUES (?1, 'a-code', 'a test', ?2, 1, ?3, NULL, ?2)`,
        ).bind(transport, now, transport === 'cloudflare' ? new Date(Date.now() - 1000).toISOString() : '2999-01-01'),
      ),
    ])
    const released = (await cron(new Date(), vars)).filter((m) => members.includes(m.notificationId))
    expect(released).toHaveLength(1)
    await drive(released, vars)
    expect(calls()).toBe(1)
    // Refused again: the probe, alone now, is tried at once through the next (whose claim holds it, resend
    // being paused too); the rest of its batch waits for resend, whole.
    expect((await rows(members)).map((row) => [row.status, row.batch_id === null])).toEqual([
      ['pending', true],
      ['paused', false],
      ['paused', false],
      ['paused', false],
    ])
  })
})
