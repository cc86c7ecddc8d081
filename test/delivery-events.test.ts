/**
 * The recipient's side of sent mail: provider delivery events (Cloudflare's
 * event subscription on the real local queue, Resend's webhook signed with
 * Svix's own library), the delivery status and timeline they make, and the
 * suppression list that hard bounces, complaints and provider refusals feed.
 */
import { env } from 'cloudflare:workers'
import { Webhook } from 'svix'
import { describe, expect, it } from 'vitest'
import { cloudflareEvent, eventIdOf, hardBounce, responseTo } from './email-events.ts'
import {
  ADMIN_TOKEN,
  deliver,
  dispatchOnce,
  eventually,
  guid,
  notificationsOf,
  postIngest,
  runCron,
} from './helpers.ts'
import { allRows, dbOfNotification } from './shards.ts'
import { fetchWorker } from './worker-fetch.ts'

const WEBHOOK_SECRET = 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ='

const admin = (path: string, init: RequestInit = {}) =>
  fetchWorker(path, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })

/** Posts an event and waits for its one notification to end (sent, suppressed, opted out…). */
async function notify(event: ReturnType<typeof responseTo>, until = 'sent') {
  expect((await postIngest({ events: [event] })).status).toBe(202)
  return eventually(async () => {
    const [row] = await notificationsOf(eventIdOf(event))
    expect(row?.status).toBe(until)
    return row as NonNullable<typeof row> & { provider_id?: string }
  })
}

async function providerIdOf(id: string): Promise<string> {
  // In the D1 shard its id names.
  const row = await dbOfNotification(id)
    .prepare('SELECT provider_id FROM notifications WHERE id = ?1')
    .bind(id)
    .first<{ provider_id: string }>()
  return row?.provider_id as string
}

type Timeline = { provider: string; type: string; status: string; occurredAt: string }[]

async function notificationView(id: string) {
  return (await (await admin(`/v1/notifications/${id}`)).json()) as {
    status: string
    deliveryStatus: string | null
    timeline: Timeline
  }
}

/** `notify_deliveries_total` of a transport and status, summed over its kinds. */
async function deliveriesCounted(transport: string, status: string): Promise<number> {
  const text = await (await admin('/metrics')).text()
  const prefix = `notify_deliveries_total{transport="${transport}",status="${status}",kind="`
  return text
    .split('\n')
    .filter((line) => line.startsWith(prefix))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0)
}

/** The address's entry, from the first D1 shard that has one (a bounce suppresses in every shard, each naming its notification). */
async function suppressionOf(address: string) {
  const [found = null] = await allRows<{
    cause: string
    until: string | null
    source: string
    notification_id: string | null
  }>('SELECT * FROM suppressions WHERE address = ?1', address)
  return found
}

describe('Cloudflare delivery events on notify-email-events', () => {
  it('delivered: the notification gets its delivery status and a timeline entry, counted once however often it comes', async () => {
    const email = `delivered-${guid().slice(0, 8)}@example.com`
    const sent = await notify(responseTo(email))
    const before = await deliveriesCounted('cloudflare', 'delivered')
    const event = cloudflareEvent('delivered', await providerIdOf(sent.id), email)
    await env.EMAIL_EVENTS.send(event)
    await env.EMAIL_EVENTS.send(event)
    await eventually(async () => expect((await notificationView(sent.id)).deliveryStatus).toBe('delivered'))
    const redelivered = await eventually(async () => {
      const { results } = await dbOfNotification(sent.id)
        .prepare('SELECT count(*) AS n FROM delivery_events WHERE notification_id = ?1')
        .bind(sent.id)
        .all<{ n: number }>()
      return results[0]?.n
    })
    expect(redelivered).toBe(1)
    const view = await notificationView(sent.id)
    expect(view.timeline).toEqual([
      expect.objectContaining({
        provider: 'cloudflare',
        type: 'cf.email.sending.message.delivered',
        status: 'delivered',
      }),
    ])
    expect(await deliveriesCounted('cloudflare', 'delivered')).toBe(before + 1)
  })

  it('an earlier deferral that arrives after the delivery does not overwrite it; the timeline keeps both, in time order', async () => {
    const email = `order-${guid().slice(0, 8)}@example.com`
    const sent = await notify(responseTo(email))
    const messageId = await providerIdOf(sent.id)
    const t0 = new Date(Date.now() - 60_000).toISOString()
    const t1 = new Date().toISOString()
    await env.EMAIL_EVENTS.send(cloudflareEvent('delivered', messageId, email, {}, t1))
    await eventually(async () => expect((await notificationView(sent.id)).deliveryStatus).toBe('delivered'))
    await env.EMAIL_EVENTS.send(cloudflareEvent('deferred', messageId, email, {}, t0))
    await eventually(async () => expect((await notificationView(sent.id)).timeline).toHaveLength(2))
    const view = await notificationView(sent.id)
    expect(view.deliveryStatus).toBe('delivered')
    expect(view.timeline.map((entry) => entry.status)).toEqual(['deferred', 'delivered'])
  })

  it('a hard bounce suppresses the address for good; the next event to it ends suppressed: no send, no retry, no dead letter', async () => {
    const email = `Bounce-${guid().slice(0, 8)}@Example.com`
    const userId = guid()
    const first = await notify(responseTo(email, userId))
    await env.EMAIL_EVENTS.send(cloudflareEvent('bounced', await providerIdOf(first.id), email, hardBounce))
    const entry = await eventually(async () => {
      const found = await suppressionOf(email.toLowerCase())
      expect(found).toBeTruthy()
      return found
    })
    expect(entry).toMatchObject({ cause: 'hard-bounce', until: null, source: 'cloudflare', notification_id: first.id })
    expect((await notificationView(first.id)).deliveryStatus).toBe('bounced')

    const next = responseTo(email, userId)
    const row = await notify(next, 'suppressed')
    expect(row.error_code).toBe('NTF_RECIPIENT_SUPPRESSED')
    const { results: sentRows } = await dbOfNotification(row.id)
      .prepare('SELECT 1 FROM sent_messages WHERE notification_id = ?1')
      .bind(row.id)
      .all()
    expect(sentRows).toHaveLength(0)
    const deadLetters = await allRows('SELECT 1 FROM dead_letters WHERE event_id = ?1', eventIdOf(next))
    expect(deadLetters).toHaveLength(0)
  })

  it('a soft bounce suppresses for SUPPRESSION_SOFT_BOUNCE_HOURS; a complaint for good; a deferral not at all', async () => {
    const soft = `soft-${guid().slice(0, 8)}@example.com`
    const complained = `complaint-${guid().slice(0, 8)}@example.com`
    const deferred = `deferred-${guid().slice(0, 8)}@example.com`
    const softBounce = {
      bounce: { type: 'soft', classification: 'temporary_failure', reason: '452 4.2.2 Mailbox full' },
    }
    const deferredId = `m-${guid()}`
    await env.EMAIL_EVENTS.send(cloudflareEvent('bounced', `m-${guid()}`, soft, softBounce))
    await env.EMAIL_EVENTS.send(
      cloudflareEvent('complained', `m-${guid()}`, complained, { complaint: { type: 'abuse' } }),
    )
    await env.EMAIL_EVENTS.send(cloudflareEvent('deferred', deferredId, deferred, softBounce))
    const entry = await eventually(async () => {
      const found = await suppressionOf(soft)
      expect(found).toBeTruthy()
      expect(await suppressionOf(complained)).toMatchObject({ cause: 'complaint', until: null })
      return found
    })
    const hours = (Date.parse(entry?.until as string) - Date.now()) / 3_600_000
    expect(entry?.cause).toBe('soft-bounce')
    expect(hours).toBeGreaterThan(23)
    expect(hours).toBeLessThanOrEqual(24)
    // The deferral was recorded (no notification of ours has that id) and suppressed nothing.
    await eventually(async () => {
      const { results } = await env.DB.prepare(
        'SELECT notification_id FROM delivery_events WHERE provider_message_id = ?1',
      )
        .bind(deferredId)
        .all<{ notification_id: string | null }>()
      expect(results).toEqual([{ notification_id: null }])
    })
    expect(await suppressionOf(deferred)).toBeNull()
  })

  it('a soft bounce never shortens a permanent entry', async () => {
    const email = `strong-${guid().slice(0, 8)}@example.com`
    await env.EMAIL_EVENTS.send(cloudflareEvent('complained', `m-${guid()}`, email, { complaint: { type: 'abuse' } }))
    await eventually(async () => expect(await suppressionOf(email)).toMatchObject({ cause: 'complaint' }))
    const softId = `m-${guid()}`
    await env.EMAIL_EVENTS.send(cloudflareEvent('bounced', softId, email, { bounce: { type: 'soft' } }))
    await eventually(async () => {
      const { results } = await env.DB.prepare('SELECT 1 FROM delivery_events WHERE provider_message_id = ?1')
        .bind(softId)
        .all()
      expect(results).toHaveLength(1)
    })
    expect(await suppressionOf(email)).toMatchObject({ cause: 'complaint', until: null })
  })

  it('an event of an unknown shape is a dead letter naming the field, never thrown', async () => {
    const messageId = `m-${guid()}`
    const broken = cloudflareEvent('delivered', messageId, 'x@example.com')
    delete (broken.payload as Record<string, unknown>).eventId
    const unknownType = {
      ...cloudflareEvent('delivered', messageId, 'x@example.com'),
      type: 'cf.email.sending.message.opened',
    }
    await env.EMAIL_EVENTS.send(broken)
    await env.EMAIL_EVENTS.send(unknownType)
    const rows = await eventually(async () => {
      const { results } = await env.DB.prepare(
        "SELECT code, error, queue FROM dead_letters WHERE queue = 'notify-email-events' AND body LIKE ?1",
      )
        .bind(`%${messageId}%`)
        .all<{ code: string; error: string; queue: string }>()
      expect(results).toHaveLength(2)
      return results
    })
    expect(rows.every((row) => row.code === 'NTF_INVALID_PAYLOAD')).toBe(true)
    expect(rows.map((row) => row.error).join('\n')).toContain('payload.eventId')
    expect(rows.map((row) => row.error).join('\n')).toContain('type')
  })
})

/** Posts a webhook signed as Resend (Svix) signs it. */
async function resendWebhook(
  event: unknown,
  options: { id?: string; at?: Date; secret?: string; contentType?: string } = {},
) {
  const id = options.id ?? `msg_${guid().replaceAll('-', '')}`
  const at = options.at ?? new Date()
  const payload = JSON.stringify(event)
  const signature = new Webhook(options.secret ?? WEBHOOK_SECRET).sign(id, at, payload)
  const response = await fetchWorker('/v1/webhooks/resend', {
    method: 'POST',
    headers: {
      'content-type': options.contentType ?? 'application/json',
      'svix-id': id,
      'svix-timestamp': String(Math.floor(at.getTime() / 1000)),
      'svix-signature': signature,
    },
    body: payload,
  })
  return { id, response }
}

/** A notification the resend transport sent: sent, with Resend's id for it. */
async function sentByResend(email: string): Promise<{ id: string; providerId: string }> {
  const id = `ntf_test_${guid().replaceAll('-', '')}`
  const providerId = `re_${guid()}`
  const now = new Date().toISOString()
  await env.DB.prepare(
    `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
       recipient_email, status, scheduled_at, sent_at, provider_id, created_at, updated_at)
     VALUES (?1, ?2, ?3, 'http', 'InvitationCreated', 'email', 'normal', ?4, ?5, 'sent', ?6, ?6, ?7, ?6, ?6)`,
  )
    .bind(id, `test:${id}`, guid(), guid(), email, now, providerId)
    .run()
  return { id, providerId }
}

const bounced = (providerId: string, email: string) => ({
  type: 'email.bounced',
  created_at: new Date().toISOString(),
  data: {
    email_id: providerId,
    created_at: new Date().toISOString(),
    from: 'notify-edge <notifications@notify-edge.example>',
    to: [email],
    subject: 'Вас пригласили в проект',
    bounce: { type: 'Permanent', subType: 'General', message: 'The recipient does not exist' },
  },
})

describe('POST /v1/webhooks/resend', () => {
  it('a signed bounce: 202, the timeline, the delivery status and a permanent suppression; the same svix-id again changes nothing', async () => {
    const email = `resend-bounce-${guid().slice(0, 8)}@example.com`
    const { id, providerId } = await sentByResend(email)
    const bounce = bounced(providerId, email)
    const first = await resendWebhook(bounce)
    expect(first.response.status).toBe(202)
    expect(await first.response.json()).toEqual({ received: true, queued: true })
    await eventually(async () => expect((await notificationView(id)).deliveryStatus).toBe('bounced'))
    expect(await suppressionOf(email)).toMatchObject({ cause: 'hard-bounce', until: null, source: 'resend' })

    const again = await resendWebhook(bounce, { id: first.id })
    expect(again.response.status).toBe(202)
    // Resend said "delivered" a minute before the bounce; it arrives after it.
    const delivered = await resendWebhook({
      type: 'email.delivered',
      created_at: new Date(Date.parse(bounce.created_at) - 60_000).toISOString(),
      data: { email_id: providerId, to: [email] },
    })
    expect(delivered.response.status).toBe(202)
    await eventually(async () => expect((await notificationView(id)).timeline).toHaveLength(2))
    const view = await notificationView(id)
    expect(view.timeline.map((entry) => entry.type)).toEqual(['email.delivered', 'email.bounced'])
    expect(view.deliveryStatus).toBe('bounced')
  })

  it('refuses a wrong signature, another secret, a timestamp out of tolerance and missing headers with 401, and queues nothing', async () => {
    const email = `resend-refused-${guid().slice(0, 8)}@example.com`
    const { providerId } = await sentByResend(email)
    const forged = await resendWebhook(bounced(providerId, email), {
      secret: 'whsec_c29tZWJvZHktZWxzZXMtc2VjcmV0LXZhbHVl',
    })
    const stale = await resendWebhook(bounced(providerId, email), { at: new Date(Date.now() - 10 * 60_000) })
    const future = await resendWebhook(bounced(providerId, email), { at: new Date(Date.now() + 10 * 60_000) })
    const tampered = await (async () => {
      const id = `msg_${guid()}`
      const at = new Date()
      const signature = new Webhook(WEBHOOK_SECRET).sign(id, at, JSON.stringify(bounced(providerId, email)))
      return fetchWorker('/v1/webhooks/resend', {
        method: 'POST',
        headers: {
          'svix-id': id,
          'svix-timestamp': String(Math.floor(at.getTime() / 1000)),
          'svix-signature': signature,
        },
        body: JSON.stringify(bounced(providerId, `someone-else-${guid().slice(0, 6)}@example.com`)),
      })
    })()
    const unsigned = await fetchWorker('/v1/webhooks/resend', { method: 'POST', body: '{}' })
    for (const response of [forged.response, stale.response, future.response, tampered, unsigned]) {
      expect(response.status).toBe(401)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED')
    }
    const { results } = await env.DB.prepare('SELECT 1 FROM delivery_events WHERE provider_message_id = ?1')
      .bind(providerId)
      .all()
    expect(results).toHaveLength(0)
    expect(await suppressionOf(email)).toBeNull()
  })

  it('a signed event that is not JSON by its type is refused (415) and records nothing, whatever its body', async () => {
    const { providerId } = await sentByResend(`typed-${guid().slice(0, 8)}@example.com`)
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/json-seq', '']) {
      const { response } = await resendWebhook(bounced(providerId, 'typed@example.com'), { contentType })
      expect(response.status, contentType).toBe(415)
      const body = (await response.json()) as { error: { code: string; issues: { field: string }[] } }
      expect(body.error.code).toBe('UNSUPPORTED_MEDIA_TYPE')
      expect(body.error.issues).toEqual([{ field: 'content-type', message: 'must be application/json' }])
    }
    expect(
      (await env.DB.prepare('SELECT 1 FROM delivery_events WHERE provider_message_id = ?1').bind(providerId).all())
        .results,
    ).toHaveLength(0)
    // With a charset, as some senders write it, it is JSON.
    const { response } = await resendWebhook(bounced(providerId, 'typed@example.com'), {
      contentType: 'application/json; charset=utf-8',
    })
    expect(response.status).toBe(202)
  })

  it('a verified event that is not about delivery (email.opened) is answered 200 and not queued', async () => {
    const { response } = await resendWebhook({ type: 'email.opened', created_at: new Date().toISOString(), data: {} })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ received: true, queued: false })
  })
})

/** A binding that refuses every send the way Cloudflare's Email Service does: an Error with a `code`. */
function refusingBinding(code: string, message = 'refused'): SendEmail {
  return {
    send: async () => {
      throw Object.assign(new Error(message), { code })
    },
  } as unknown as SendEmail
}

async function pending(email: string): Promise<string> {
  const id = `ntf_test_${guid().replaceAll('-', '')}`
  const now = new Date().toISOString()
  await env.DB.prepare(
    `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
       recipient_email, recipient_name, locale, subject, text_body, html_body, status, scheduled_at, created_at, updated_at)
     VALUES (?1, ?2, ?3, 'http', 'InvitationCreated', 'email', 'normal', ?4, ?5, NULL, 'ru', 'Тема', 'Текст', '<p>Текст</p>',
       'pending', ?6, ?6, ?6)`,
  )
    .bind(id, `test:${id}`, guid(), guid(), email, now)
    .run()
  return id
}

async function dispatchWith(id: string, binding: SendEmail) {
  const result = await dispatchOnce({ notificationId: id }, { EMAIL: binding })
  const row = await env.DB.prepare('SELECT status, error_code FROM notifications WHERE id = ?1')
    .bind(id)
    .first<{ status: string; error_code: string | null }>()
  return { ...result, row }
}

/** Seconds from now to a notification's next try. */
async function secondsToRetry(id: string): Promise<number> {
  const row = await env.DB.prepare('SELECT scheduled_at FROM notifications WHERE id = ?1')
    .bind(id)
    .first<{ scheduled_at: string }>()
  return Math.round((Date.parse(row?.scheduled_at as string) - Date.now()) / 1000)
}

describe('the Email Service error codes, mapped by code', () => {
  it('E_RECIPIENT_SUPPRESSED: the notification ends suppressed, the address joins the list, no retry, no dead letter', async () => {
    const email = `cf-suppressed-${guid().slice(0, 8)}@example.com`
    const id = await pending(email)
    const result = await dispatchWith(id, refusingBinding('E_RECIPIENT_SUPPRESSED', 'Recipient is on suppression list'))
    expect(result.row).toEqual({ status: 'suppressed', error_code: 'NTF_RECIPIENT_SUPPRESSED' })
    expect(result.explicitAcks).toHaveLength(1)
    expect(result.delays).toEqual([])
    const entry = await suppressionOf(email)
    expect(entry).toMatchObject({ cause: 'provider', source: 'cloudflare', notification_id: id })
    const days = (Date.parse(entry?.until as string) - Date.now()) / 86_400_000
    expect(days).toBeGreaterThan(6.9)
    expect(days).toBeLessThanOrEqual(7)
    const { results } = await env.DB.prepare('SELECT 1 FROM dead_letters WHERE body LIKE ?1').bind(`%${id}%`).all()
    expect(results).toHaveLength(0)
  })

  it('the rate limit is transient and waits longer; a code decides even when the text says otherwise', async () => {
    const rateId = await pending(`cf-rate-${guid().slice(0, 8)}@example.com`)
    const rate = await dispatchWith(
      rateId,
      refusingBinding('E_RATE_LIMIT_EXCEEDED', 'email to x not allowed right now'),
    )
    expect(rate.row?.status).toBe('pending')
    expect(rate.delays).toEqual([])
    expect(await secondsToRetry(rateId)).toBeGreaterThanOrEqual(59)
    expect(rate.enqueued).toHaveLength(1)
    const unknownId = await pending(`cf-new-${guid().slice(0, 8)}@example.com`)
    const unknown = await dispatchWith(unknownId, refusingBinding('E_SOMETHING_NEW', 'rejected'))
    expect(unknown.row?.status).toBe('pending')
    expect(await secondsToRetry(unknownId)).toBeGreaterThanOrEqual(4)
    expect(await secondsToRetry(unknownId)).toBeLessThanOrEqual(5)
  })

  it('a recipient or validation refusal is about the message: failed at once, as a dead letter', async () => {
    const id = await pending(`cf-invalid-${guid().slice(0, 8)}@example.com`)
    const result = await dispatchWith(id, refusingBinding('E_RECIPIENT_NOT_ALLOWED', 'Recipient not allowed'))
    expect(result.row).toEqual({ status: 'failed', error_code: 'NTF_SEND_PERMANENT' })
    expect(result.explicitAcks).toHaveLength(1)
    await eventually(async () => {
      const dead = await env.DB.prepare('SELECT code FROM dead_letters WHERE body LIKE ?1').bind(`%${id}%`).first()
      expect(dead).toEqual({ code: 'NTF_SEND_PERMANENT' })
    })
  })
})

describe('/v1/suppressions', () => {
  it('an operator entry stops sends to the address; removing it lets the next one through', async () => {
    const email = `operator-${guid().slice(0, 8)}@example.com`
    const put = await admin(`/v1/suppressions/${encodeURIComponent(email.toUpperCase())}`, {
      method: 'PUT',
      body: JSON.stringify({ reason: 'asked by phone not to be mailed' }),
    })
    expect(put.status).toBe(200)
    expect(await put.json()).toMatchObject({
      address: email,
      cause: 'operator',
      source: 'operator',
      active: true,
      until: null,
    })
    const userId = guid()
    await notify(responseTo(email, userId), 'suppressed')
    expect((await admin(`/v1/suppressions/${encodeURIComponent(email)}`, { method: 'DELETE' })).status).toBe(204)
    expect((await admin(`/v1/suppressions/${encodeURIComponent(email)}`)).status).toBe(404)
    await notify(responseTo(email, userId), 'sent')
  })

  it('refuses an end in the past and a malformed address, naming the field, and writes nothing', async () => {
    const email = `past-${guid().slice(0, 8)}@example.com`
    const past = await admin(`/v1/suppressions/${email}`, {
      method: 'PUT',
      body: JSON.stringify({ reason: 'x', until: '2001-01-01T00:00:00Z' }),
    })
    expect(past.status).toBe(400)
    expect(((await past.json()) as { error: { issues: { field: string }[] } }).error.issues[0]?.field).toBe('until')
    const malformed = await admin('/v1/suppressions/not-an-address', {
      method: 'PUT',
      body: JSON.stringify({ reason: 'x' }),
    })
    expect(malformed.status).toBe(400)
    expect(await suppressionOf(email)).toBeNull()
  })

  it('lists in pages that neither repeat nor skip, with filters', async () => {
    const prefix = `page-${guid().slice(0, 6)}`
    const addresses = Array.from({ length: 5 }, (_, i) => `${prefix}-${i}@example.com`)
    for (const [i, address] of addresses.entries()) {
      const until = i % 2 === 0 ? undefined : new Date(Date.now() + 86_400_000).toISOString()
      await admin(`/v1/suppressions/${address}`, { method: 'PUT', body: JSON.stringify({ reason: 'test', until }) })
    }
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const query: string = `cause=operator&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`
      const page = (await (await admin(`/v1/suppressions?${query}`)).json()) as {
        items: { address: string }[]
        nextCursor: string | null
      }
      seen.push(...page.items.map((item) => item.address))
      cursor = page.nextCursor
    } while (cursor)
    const ours = seen.filter((address) => address.startsWith(prefix))
    expect(ours).toEqual(addresses)
    expect(new Set(seen).size).toBe(seen.length)
    const badCursor = await admin('/v1/suppressions?cursor=%%%')
    expect(badCursor.status).toBe(400)
  })
})

describe('unknown outcomes through the binding (no idempotency key): resolved, not resent blindly', () => {
  /** A binding whose answer is lost: it may have taken the message, and says only that the connection broke. */
  function losingBinding() {
    const calls: unknown[] = []
    const binding = {
      send: async (message: unknown) => {
        calls.push(message)
        throw new Error('Network connection lost.')
      },
    } as unknown as SendEmail
    return { binding, calls }
  }

  const rowOf = (id: string) =>
    env.DB.prepare(
      'SELECT status, error_code, provider_id, scheduled_at, delivery_status, send_attempts FROM notifications WHERE id = ?1',
    )
      .bind(id)
      .first<{
        status: string
        error_code: string | null
        provider_id: string | null
        scheduled_at: string
        delivery_status: string | null
        send_attempts: number
      }>()

  it('a lost answer waits as unknown; the delivery event for its Message-ID settles it as sent, nothing is sent twice', async () => {
    const email = `lost-${guid().slice(0, 8)}@example.com`
    const id = await pending(email)
    const { binding, calls } = losingBinding()
    const result = await dispatchOnce({ notificationId: id }, { EMAIL: binding })
    expect(result.explicitAcks).toHaveLength(1)
    expect(result.enqueued).toEqual([])
    const row = await rowOf(id)
    expect(row).toMatchObject({
      status: 'unknown',
      error_code: 'NTF_SEND_UNKNOWN',
      provider_id: `<${id}@notify-edge.example>`,
    })
    const minutes = (Date.parse(row?.scheduled_at as string) - Date.now()) / 60_000
    expect(minutes).toBeGreaterThan(9.9)
    expect(minutes).toBeLessThanOrEqual(10)
    // Within the window the cron leaves it alone.
    await runCron(new Date())
    expect((await rowOf(id))?.status).toBe('unknown')
    // Cloudflare reports the message delivered: it had gone out.
    await env.EMAIL_EVENTS.send(cloudflareEvent('delivered', `<${id}@notify-edge.example>`, email))
    await eventually(async () =>
      expect(await rowOf(id)).toMatchObject({ status: 'sent', delivery_status: 'delivered', send_attempts: 1 }),
    )
    expect(calls).toHaveLength(1)
  })

  it('no delivery event within the window: sent again once, under the same Message-ID', async () => {
    const id = await pending(`lost-${guid().slice(0, 8)}@example.com`)
    await dispatchOnce({ notificationId: id }, { EMAIL: losingBinding().binding })
    expect((await rowOf(id))?.status).toBe('unknown')
    await env.DB.prepare('UPDATE notifications SET scheduled_at = ?2 WHERE id = ?1')
      .bind(id, new Date(Date.now() - 1000).toISOString())
      .run()
    await runCron(new Date())
    await eventually(async () => expect(await rowOf(id)).toMatchObject({ status: 'sent', send_attempts: 2 }))
    const sent = await env.DB.prepare('SELECT message_id FROM sent_messages WHERE notification_id = ?1')
      .bind(id)
      .first()
    expect(sent).toEqual({ message_id: `<${id}@notify-edge.example>` })
  })

  it('a claim that ended without a result (sent, then the mark was lost): the binding waits as unknown, resend is taken over', async () => {
    const expired = new Date(Date.now() - 1000).toISOString()
    const leftSending = async () => {
      const id = await pending(`left-${guid().slice(0, 8)}@example.com`)
      await env.DB.prepare(
        "UPDATE notifications SET status = 'sending', claim_token = 'crashed', lease_until = ?2, send_attempts = 1 WHERE id = ?1",
      )
        .bind(id, expired)
        .run()
      return id
    }
    const viaBinding = await leftSending()
    const { binding, calls } = losingBinding()
    await dispatchOnce({ notificationId: viaBinding }, { EMAIL: binding })
    expect(calls).toHaveLength(0)
    expect(await rowOf(viaBinding)).toMatchObject({
      status: 'unknown',
      provider_id: `<${viaBinding}@notify-edge.example>`,
    })

    const viaResend = await leftSending()
    await dispatchOnce(
      { notificationId: viaResend },
      { EMAIL_TRANSPORT: 'resend', RESEND_API_KEY: 'test-resend-key', RESEND_API_URL: 'http://fake-resend.test' },
    )
    expect(await rowOf(viaResend)).toMatchObject({ status: 'sent', provider_id: `re_${viaResend}` })
  })

  it('a delivery event stored before its notification was found unknown (a crash right after the send) settles it at the next cron', async () => {
    const email = `crash-${guid().slice(0, 8)}@example.com`
    const id = await pending(email)
    await env.DB.prepare(
      "UPDATE notifications SET status = 'sending', claim_token = 'crashed', lease_until = ?2, send_attempts = 1 WHERE id = ?1",
    )
      .bind(id, new Date(Date.now() - 1000).toISOString())
      .run()
    // The provider's event came while the row was still `sending` with no provider id: after its waits, stored unlinked.
    const stored = await deliver(
      cloudflareEvent('delivered', `<${id}@notify-edge.example>`, email),
      3,
      `e-${guid()}`,
      'notify-email-events',
    )
    expect(stored.explicitAcks).toHaveLength(1)
    const { binding, calls } = losingBinding()
    await dispatchOnce({ notificationId: id }, { EMAIL: binding })
    expect((await rowOf(id))?.status).toBe('unknown')
    await runCron(new Date())
    expect(await rowOf(id)).toMatchObject({ status: 'sent', send_attempts: 1 })
    expect(calls).toHaveLength(0)
    const linked = await env.DB.prepare('SELECT notification_id FROM delivery_events WHERE provider_message_id = ?1')
      .bind(`${id}@notify-edge.example`)
      .first()
    expect(linked).toEqual({ notification_id: id })
  })

  it('a delivery event that beats the sent mark waits for it and is linked, not left without its notification', async () => {
    const email = `early-${guid().slice(0, 8)}@example.com`
    const id = await pending(email)
    const messageId = `<${id}@notify-edge.example>`
    const event = cloudflareEvent('delivered', messageId, email)
    // The provider's event arrives while the send is still being recorded.
    const early = await deliver(event, 1, `e-${guid()}`, 'notify-email-events')
    expect(early.retryMessages).toEqual([expect.objectContaining({ delaySeconds: 2 })])
    const { results: none } = await env.DB.prepare('SELECT 1 FROM delivery_events WHERE provider_message_id = ?1')
      .bind(`${id}@notify-edge.example`)
      .all()
    expect(none).toHaveLength(0)
    await env.DB.prepare("UPDATE notifications SET status = 'sent', provider_id = ?2 WHERE id = ?1")
      .bind(id, messageId)
      .run()
    const later = await deliver(event, 2, `e-${guid()}`, 'notify-email-events')
    expect(later.explicitAcks).toHaveLength(1)
    expect(await rowOf(id)).toMatchObject({ delivery_status: 'delivered' })
    const linked = await env.DB.prepare('SELECT notification_id FROM delivery_events WHERE provider_message_id = ?1')
      .bind(`${id}@notify-edge.example`)
      .first()
    expect(linked).toEqual({ notification_id: id })
  })
})
