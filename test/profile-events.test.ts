import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import {
  ADMIN_TOKEN,
  deliver,
  dispatchOnce,
  eventually,
  freshInbound,
  guid,
  notificationsOf,
  parseMime,
  runCron,
  seedContact,
  sentMessagesOf,
} from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

/** A verification story with its own person, owner, reviewer and request. */
async function story(options: { ownerContact?: boolean; reviewerContact?: boolean } = {}) {
  const ids = { owner: guid(), person: guid(), request: guid(), reviewer: guid() }
  if (options.ownerContact !== false) {
    await seedContact(ids.owner, { email: `owner-${ids.owner.slice(0, 8)}@example.com`, displayName: 'Анна Клиент' })
  }
  if (options.reviewerContact !== false) {
    await seedContact(ids.reviewer, {
      email: `reviewer-${ids.reviewer.slice(0, 8)}@example.com`,
      displayName: 'Рецензент',
    })
  }
  const submitted = () =>
    freshInbound('verification-request-submitted', (value) => {
      Object.assign(value, {
        RequestId: ids.request,
        PersonId: ids.person,
        UserId: ids.owner,
        ReviewerUserId: ids.reviewer,
      })
    })
  const completed = (decision: string, reason?: string) =>
    freshInbound('verification-completed', (value) => {
      Object.assign(value, { RequestId: ids.request, PersonId: ids.person, UserId: ids.owner, Decision: decision })
      if (reason === undefined) delete value.Reason
      else value.Reason = reason
    })
  const personUpserted = (
    status: string | null,
    previous: string | null = 'pending',
    requestId: string | null = ids.request,
  ) =>
    freshInbound('person-upserted', (value) => {
      Object.assign(value, {
        PersonId: ids.person,
        UserId: ids.owner,
        VerificationStatus: status,
        PreviousVerificationStatus: previous,
        VerificationRequestId: requestId,
      })
    })
  return { ids, submitted, completed, personUpserted }
}

const messageIdOf = (event: { headers: Record<string, string> }) => event.headers['message-id'] as string

async function outcomeOf(eventId: string): Promise<string | undefined> {
  const row = await env.DB.prepare('SELECT outcome FROM processed_marks WHERE event_id = ?1')
    .bind(eventId)
    .first<{ outcome: string }>()
  return row?.outcome
}

/** Waits until the event's notifications have reached their final status. */
async function settled(eventId: string, status = 'sent') {
  return eventually(async () => {
    const rows = await notificationsOf(eventId)
    expect(rows.length).toBeGreaterThan(0)
    for (const row of rows) expect(row.status).toBe(status)
    return rows
  })
}

describe('profile events → notifications (the PIN profile-events acceptance criteria)', () => {
  it('Given verification-request-submitted, When the consumer processes it, Then the PIN reviewer gets a NotificationEntity(Pending, Kind=VerificationSubmitted)', async () => {
    const { ids, submitted } = await story()
    const event = submitted()
    const result = await deliver(event, 1)
    expect(result.explicitAcks).toHaveLength(1)
    const [created, ...others] = await notificationsOf(messageIdOf(event))
    expect(others).toEqual([])
    expect(created).toMatchObject({ kind: 'VerificationSubmitted', recipient_user_id: ids.reviewer, urgency: 'normal' })
    expect(['pending', 'sending', 'sent']).toContain(created?.status)
    expect(await outcomeOf(messageIdOf(event))).toBe('enqueued')
    const counter = await env.DB.prepare(
      "SELECT value FROM counters WHERE name = 'notify_notifications_total' AND labels = ?1",
    )
      .bind(JSON.stringify({ channel: 'email', kind: 'VerificationSubmitted', status: 'pending' }))
      .first<{ value: number }>()
    expect(counter?.value).toBeGreaterThanOrEqual(1)
    const [row] = await settled(messageIdOf(event))
    expect(row?.subject).toBe('Новая заявка на верификацию')
  })

  it('Given verification-completed(rejected, Reason), When processed, Then the owner gets VerificationRejected with the Reason, seen only by the owner', async () => {
    const { ids, submitted, completed } = await story()
    const reason = `Скан паспорта нечитаем ${guid()}`
    const request = submitted()
    await deliver(request, 1)
    const decision = completed('rejected', reason)
    await deliver(decision, 1)
    const [row, ...others] = await settled(messageIdOf(decision))
    expect(others).toEqual([])
    expect(row).toMatchObject({ kind: 'VerificationRejected', recipient_user_id: ids.owner })
    const [sent] = await sentMessagesOf(messageIdOf(decision))
    const mail = parseMime(sent?.raw as string)
    expect(mail.headers.subject).toBe('Верификация отклонена')
    expect(mail.headers.to).toContain(`owner-${ids.owner.slice(0, 8)}@example.com`)
    expect(mail.text).toContain(`Причина: ${reason}`)
    // The reviewer's notification about the same request does not carry it.
    await settled(messageIdOf(request))
    const { results } = await env.DB.prepare(
      'SELECT recipient_user_id FROM notifications WHERE instr(text_body, ?1) OR instr(html_body, ?1) OR instr(subject, ?1)',
    )
      .bind(reason)
      .all()
    expect(results).toEqual([{ recipient_user_id: ids.owner }])
  })

  it('Given person-upserted with a verification status change already covered by the request event, When mapped, Then ignored-event (ack) and no duplicate notification', async () => {
    const { completed, personUpserted } = await story()
    const decision = completed('approved')
    await deliver(decision, 1)
    await settled(messageIdOf(decision))
    const upsert = personUpserted('approved')
    const result = await deliver(upsert, 1)
    expect(result.explicitAcks).toHaveLength(1)
    expect(await outcomeOf(messageIdOf(upsert))).toBe('ignored-event')
    expect(await notificationsOf(messageIdOf(upsert))).toEqual([])
  })

  it('Given person-upserted without a verification status change, When filtered, Then ignored-event (ack)', async () => {
    const { personUpserted } = await story()
    for (const upsert of [personUpserted('pending', 'pending'), personUpserted(null, null)]) {
      const result = await deliver(upsert, 1)
      expect(result.explicitAcks).toHaveLength(1)
      expect(await outcomeOf(messageIdOf(upsert))).toBe('ignored-event')
      expect(await notificationsOf(messageIdOf(upsert))).toEqual([])
    }
  })

  it('Given the same event delivered again, When processed, Then skipped-duplicate (ack) and no new notifications', async () => {
    const { completed } = await story()
    const decision = completed('approved')
    await deliver(decision, 1)
    const [first] = await settled(messageIdOf(decision))
    await env.IDEMPOTENCY.delete(`notifications-profile:verification-completed:${messageIdOf(decision)}`)
    // Once past KV (deleted above) so D1 decides, once through the KV fast path.
    for (const _ of [1, 2]) {
      const again = await deliver({ ...decision, sourceMessageId: guid() }, 1)
      expect(again.explicitAcks).toHaveLength(1)
    }
    const rows = await notificationsOf(messageIdOf(decision))
    expect(rows).toEqual([first])
    expect(await sentMessagesOf(messageIdOf(decision))).toHaveLength(1)
  })
})

describe('verification decisions from two sources: one email per decision in either order', () => {
  it('person-upserted first: the fallback waits out its grace, then is superseded by the authoritative decision', async () => {
    const { ids, completed, personUpserted } = await story()
    const upsert = personUpserted('rejected')
    await deliver(upsert, 1)
    const [fallback] = await notificationsOf(messageIdOf(upsert))
    expect(fallback).toMatchObject({ kind: 'VerificationRejected', urgency: 'low', status: 'pending', is_fallback: 1 })
    expect(Date.parse(fallback?.scheduled_at as string)).toBeGreaterThanOrEqual(Date.now() + 500_000)

    const decision = completed('rejected', 'Нечитаемый скан')
    await deliver(decision, 1)
    await settled(messageIdOf(decision))

    // The grace period is over: its dispatch message arrives and finds the authoritative notification.
    await env.DB.prepare("UPDATE notifications SET scheduled_at = '2000-01-01T00:00:00.000Z' WHERE id = ?1")
      .bind(fallback?.id)
      .run()
    const result = await deliver({ notificationId: fallback?.id }, 1, `msg-${guid()}`, 'notify-dispatch')
    expect(result.explicitAcks).toHaveLength(1)
    const [ended] = await notificationsOf(messageIdOf(upsert))
    expect(ended).toMatchObject({ status: 'superseded' })
    const { results } = await env.DB.prepare(
      "SELECT count(*) AS n FROM notifications WHERE recipient_user_id = ?1 AND status = 'sent'",
    )
      .bind(ids.owner)
      .all<{ n: number }>()
    expect(results[0]?.n).toBe(1)
  })

  it('fallback already sent: the authoritative decision is superseded by it', async () => {
    const { ids, completed, personUpserted } = await story()
    const upsert = personUpserted('approved')
    await deliver(upsert, 1)
    const [fallback] = await notificationsOf(messageIdOf(upsert))
    await env.DB.prepare("UPDATE notifications SET scheduled_at = '2000-01-01T00:00:00.000Z' WHERE id = ?1")
      .bind(fallback?.id)
      .run()
    await deliver({ notificationId: fallback?.id }, 1, `msg-${guid()}`, 'notify-dispatch')
    expect((await notificationsOf(messageIdOf(upsert)))[0]?.status).toBe('sent')

    const decision = completed('approved')
    await deliver(decision, 1)
    await settled(messageIdOf(decision), 'superseded')
    const { results } = await env.DB.prepare(
      'SELECT status FROM notifications WHERE recipient_user_id = ?1 ORDER BY status',
    )
      .bind(ids.owner)
      .all<{ status: string }>()
    expect(results.map((row) => row.status)).toEqual(['sent', 'superseded'])
  })

  it('fallback still sending: the authoritative decision waits; the fallback fails, so the authoritative one (with its reason) is sent — one email', async () => {
    const { ids, completed, personUpserted } = await story()
    const upsert = personUpserted('rejected')
    await deliver(upsert, 1)
    const [fallback] = await notificationsOf(messageIdOf(upsert))
    // The fallback's send is in flight (another delivery holds a live lease).
    const leaseEnd = new Date(Date.now() + 600_000).toISOString()
    await env.DB.prepare(
      "UPDATE notifications SET status = 'sending', claim_token = 'elsewhere', lease_until = ?2 WHERE id = ?1",
    )
      .bind(fallback?.id, leaseEnd)
      .run()

    const decision = completed('rejected', 'Документ нечитаем')
    await deliver(decision, 1)
    const [authoritative] = await notificationsOf(messageIdOf(decision))
    expect(authoritative).toMatchObject({ status: 'pending', is_fallback: 0 })
    const due = authoritative?.scheduled_at as string
    const held = await dispatchOnce({ notificationId: authoritative?.id as string, due })
    expect(held.explicitAcks).toHaveLength(1)
    expect(held.enqueued.map((message) => message.body)).toEqual([{ notificationId: authoritative?.id, due }])
    expect((await notificationsOf(messageIdOf(decision)))[0]?.status).toBe('pending')

    // The fallback's send fails for good: the authoritative decision is the one that goes out.
    await env.DB.prepare("UPDATE notifications SET status = 'failed', lease_until = NULL WHERE id = ?1")
      .bind(fallback?.id)
      .run()
    await dispatchOnce({ notificationId: authoritative?.id as string, due })
    await settled(messageIdOf(decision), 'sent')
    const [mail] = await sentMessagesOf(messageIdOf(decision))
    expect(parseMime(mail?.raw as string).text).toContain('Документ нечитаем')
    const { results } = await env.DB.prepare(
      'SELECT status FROM notifications WHERE recipient_user_id = ?1 ORDER BY status',
    )
      .bind(ids.owner)
      .all<{ status: string }>()
    expect(results.map((row) => row.status)).toEqual(['failed', 'sent'])
  })

  it('a fallback without a request id matches the authoritative decision made with it, not an older one: a later decision (a new request) is notified', async () => {
    const { ids, completed, personUpserted } = await story()
    const at = (event: { headers: Record<string, string> }, time: string) => {
      event.headers['created-at'] = time
      return event
    }
    const sendNow = async (eventId: string) => {
      const [row] = await notificationsOf(eventId)
      await env.DB.prepare("UPDATE notifications SET scheduled_at = '2000-01-01T00:00:00.000Z' WHERE id = ?1")
        .bind(row?.id)
        .run()
      await deliver({ notificationId: row?.id }, 1, `msg-${guid()}`, 'notify-dispatch')
    }
    // Monday: the decision arrives only from persons.v1, without a request id; its fallback is sent.
    const monday = at(personUpserted('rejected', 'pending', null), '2026-07-13T10:00:00Z')
    await deliver(monday, 1)
    await sendNow(messageIdOf(monday))
    await settled(messageIdOf(monday))
    // Monday, a second later: the authoritative event of that same decision → superseded (one email).
    const mondayDecision = at(completed('rejected'), '2026-07-13T10:00:01Z')
    await deliver(mondayDecision, 1)
    await settled(messageIdOf(mondayDecision), 'superseded')

    // Friday: a new request, rejected again. Its authoritative event is notified, not superseded by Monday's fallback.
    const fridayRequest = guid()
    const friday = at(
      freshInbound('verification-completed', (value) => {
        Object.assign(value, {
          RequestId: fridayRequest,
          PersonId: ids.person,
          UserId: ids.owner,
          Decision: 'rejected',
        })
      }),
      '2026-07-17T10:00:00Z',
    )
    await deliver(friday, 1)
    await settled(messageIdOf(friday))
    // Its persons.v1 echo without a request id, a second later, is covered by it: ignored.
    const fridayEcho = at(personUpserted('rejected', 'pending', null), '2026-07-17T10:00:01Z')
    await deliver(fridayEcho, 1)
    expect(await outcomeOf(messageIdOf(fridayEcho))).toBe('ignored-event')
    // Sunday: rejected once more, seen only on persons.v1: not covered by Friday's decision, so notified.
    const sunday = at(personUpserted('rejected', 'pending', null), '2026-07-19T10:00:00Z')
    await deliver(sunday, 1)
    expect(await outcomeOf(messageIdOf(sunday))).toBe('enqueued')
    await sendNow(messageIdOf(sunday))
    await settled(messageIdOf(sunday))

    const { results } = await env.DB.prepare(
      "SELECT count(*) AS n FROM notifications WHERE recipient_user_id = ?1 AND status = 'sent'",
    )
      .bind(ids.owner)
      .all<{ n: number }>()
    expect(results[0]?.n).toBe(3)
  })

  it('an unknown Decision value is ignored-event with a log line, not a dead letter', async () => {
    const { completed } = await story()
    const decision = completed('escalated')
    const result = await deliver(decision, 1)
    expect(result.explicitAcks).toHaveLength(1)
    expect(await outcomeOf(messageIdOf(decision))).toBe('ignored-event')
    expect(await notificationsOf(messageIdOf(decision))).toEqual([])
  })
})

describe('recipients and the contact replica', () => {
  it('a request without ReviewerUserId goes to every reviewer of the pool, once each', async () => {
    const reviewers = [guid(), guid()]
    for (const reviewer of reviewers) {
      await seedContact(reviewer)
      await env.DB.prepare('INSERT INTO reviewer_pool (user_id, added_at) VALUES (?1, ?2)')
        .bind(reviewer, new Date().toISOString())
        .run()
    }
    const event = freshInbound('verification-request-submitted', (value) => {
      delete value.ReviewerUserId
    })
    await deliver(event, 1)
    const rows = await notificationsOf(messageIdOf(event))
    const pool = await env.DB.prepare('SELECT count(*) AS n FROM reviewer_pool').first<{ n: number }>()
    expect(rows).toHaveLength(pool?.n ?? 0)
    expect(rows.map((row) => row.recipient_user_id)).toEqual(expect.arrayContaining(reviewers))
    await env.DB.prepare('DELETE FROM reviewer_pool WHERE user_id IN (?1, ?2)')
      .bind(...reviewers)
      .run()
  })

  it('no recipient at all → no-recipients (ack)', async () => {
    const pool = await env.DB.prepare('SELECT count(*) AS n FROM reviewer_pool').first<{ n: number }>()
    expect(pool?.n).toBe(0)
    const event = freshInbound('verification-request-submitted', (value) => {
      delete value.ReviewerUserId
    })
    const result = await deliver(event, 1)
    expect(result.explicitAcks).toHaveLength(1)
    expect(await outcomeOf(messageIdOf(event))).toBe('no-recipients')
  })

  it('a decision whose contact arrives late waits for it: the contact-upserted event releases it and the email goes out', async () => {
    const { ids, completed } = await story({ ownerContact: false })
    const decision = completed('rejected', 'Фото размыто')
    const result = await deliver(decision, 1)
    expect(result.explicitAcks).toHaveLength(1)
    expect(result.retryMessages).toEqual([])
    expect(await outcomeOf(messageIdOf(decision))).toBe('awaiting-contact')
    const [waiting] = await notificationsOf(messageIdOf(decision))
    expect(waiting).toMatchObject({ status: 'awaiting-contact', recipient_user_id: ids.owner, recipient_email: null })
    const hours = (Date.parse(waiting?.scheduled_at as string) - Date.now()) / 3_600_000
    expect(hours).toBeGreaterThan(23.9)
    expect(hours).toBeLessThanOrEqual(24)

    // The contact arrives a minute later (any delay: the notification keeps waiting until CONTACT_WAIT_HOURS).
    const contact = freshInbound('contact-upserted', (value) => {
      Object.assign(value, { UserId: ids.owner, Version: 1, Email: `late-${ids.owner.slice(0, 8)}@example.com` })
    })
    await deliver(contact, 1)
    const [sent] = await settled(messageIdOf(decision), 'sent')
    expect(sent?.recipient_email).toBe(`late-${ids.owner.slice(0, 8)}@example.com`)
    const [mail] = await sentMessagesOf(messageIdOf(decision))
    expect(parseMime(mail?.raw as string).text).toContain('Фото размыто')
  })

  it('a contact an operator adds releases the waiting notification through the cron; a wait that ends is a dead letter to replay', async () => {
    const admin = (method: string, path: string, body?: unknown) =>
      fetchWorker(path, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    // The operator's way: PUT /v1/contacts, and the next cron run releases it.
    const first = await story({ ownerContact: false })
    const decided = first.completed('approved')
    await deliver(decided, 1)
    expect((await admin('PUT', `/v1/contacts/${first.ids.owner}`, { email: 'put-by-hand@example.com' })).status).toBe(
      200,
    )
    await runCron(new Date())
    await settled(messageIdOf(decided), 'sent')

    // No contact within the wait: undeliverable and a dead letter; the contact, then the replay, sends it.
    const second = await story({ ownerContact: false })
    const late = second.completed('approved')
    await deliver(late, 1)
    const [waiting] = await notificationsOf(messageIdOf(late))
    await env.DB.prepare("UPDATE notifications SET scheduled_at = '2000-01-01T00:00:00.000Z' WHERE id = ?1")
      .bind(waiting?.id)
      .run()
    await runCron(new Date())
    expect((await notificationsOf(messageIdOf(late)))[0]).toMatchObject({
      status: 'undeliverable',
      error_code: 'NTF_CONTACT_NOT_FOUND',
    })
    const dead = await eventually(async () => {
      const row = await env.DB.prepare('SELECT id, code, queue FROM dead_letters WHERE body LIKE ?1')
        .bind(`%${waiting?.id}%`)
        .first<{ id: string; code: string; queue: string }>()
      expect(row).toMatchObject({ code: 'NTF_CONTACT_NOT_FOUND', queue: 'notify-dispatch' })
      return row
    })
    // A replay waits again; a second wait that ends opens a dead letter of its own.
    expect((await admin('POST', `/v1/dead-letters/${dead?.id}/replay`)).status).toBe(200)
    expect((await notificationsOf(messageIdOf(late)))[0]?.status).toBe('awaiting-contact')
    await env.DB.prepare("UPDATE notifications SET scheduled_at = '2000-01-02T00:00:00.000Z' WHERE id = ?1")
      .bind(waiting?.id)
      .run()
    await runCron(new Date())
    const again = await eventually(async () => {
      const row = await env.DB.prepare("SELECT id FROM dead_letters WHERE body LIKE ?1 AND status = 'open'")
        .bind(`%${waiting?.id}%`)
        .first<{ id: string }>()
      expect(row).toBeTruthy()
      return row as { id: string }
    })
    await seedContact(second.ids.owner, { email: 'at-last@example.com' })
    expect((await admin('POST', `/v1/dead-letters/${again.id}/replay`)).status).toBe(200)
    expect((await notificationsOf(messageIdOf(late)))[0]?.status).toBe('awaiting-contact')
    await runCron(new Date())
    const [sent] = await settled(messageIdOf(late), 'sent')
    expect(sent?.recipient_email).toBe('at-last@example.com')
  })

  it('contact-upserted feeds the replica; an older Version never overwrites a newer one', async () => {
    const userId = guid()
    const upsert = (version: number, email: string) =>
      freshInbound('contact-upserted', (value) => {
        Object.assign(value, { UserId: userId, Version: version, Email: email })
      })
    await deliver(upsert(5, 'new@example.com'), 1)
    await deliver(upsert(3, 'old@example.com'), 1)
    const row = await env.DB.prepare('SELECT email, version FROM contacts WHERE user_id = ?1').bind(userId).first()
    expect(row).toEqual({ email: 'new@example.com', version: 5 })
    await deliver(upsert(6, 'newest@example.com'), 1)
    expect(await env.DB.prepare('SELECT email FROM contacts WHERE user_id = ?1').bind(userId).first()).toEqual({
      email: 'newest@example.com',
    })
  })

  it("a contact upserted earlier in the same batch is used for the batch's later events", async () => {
    const owner = guid()
    const contact = freshInbound('contact-upserted', (value) => {
      Object.assign(value, { UserId: owner, Version: 1, Email: 'fresh@example.com', Locale: 'en-US' })
    })
    const decision = freshInbound('verification-completed', (value) => {
      Object.assign(value, { UserId: owner, Decision: 'approved' })
    })
    const { deliverBatch } = await import('./helpers.ts')
    const result = await deliverBatch([
      { id: 'contact', attempts: 1, body: contact },
      { id: 'decision', attempts: 1, body: decision },
    ])
    expect(result.explicitAcks.sort()).toEqual(['contact', 'decision'])
    const [row] = await notificationsOf(messageIdOf(decision))
    expect(row).toMatchObject({
      recipient_email: 'fresh@example.com',
      locale: 'en',
      subject: 'Your verification is approved',
    })
  })
})
