/**
 * Erasure: one admin call erases a recipient from every table — by user id or
 * by address — leaving no trace of their address or name in any text column
 * of any table, while an address that bounced stays suppressed (under its
 * pseudonym) and the audit trail records the erasure without the address.
 * The person is made through the real pipeline: a contact, preferences, the
 * reviewer pool, a sent email with its raw MIME, a hard bounce reported by
 * the provider, an operator's suppression, dead letters naming them.
 */
import { createExecutionContext, createMessageBatch } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import type { AuditRecord } from '../src/audit/record.ts'
import worker from '../src/index.ts'
import { ADMIN_TOKEN, eventually, freshInbound, guid, inbound, notificationsOf, postIngest } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const VIEWER_TOKEN = 'test-viewer-token-0123456789'

type Answer = { status: number; body: Record<string, unknown> & { error?: { code: string } } }

async function call(method: string, path: string, body?: unknown, token = ADMIN_TOKEN): Promise<Answer> {
  const response = await fetchWorker(
    path,
    {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    },
    { VIEWER_TOKEN },
  )
  const text = await response.text()
  return { status: response.status, body: text ? JSON.parse(text) : {} }
}

/** A response.created event to this person, their address and name inline. */
function responseTo(person: Person) {
  return freshInbound('response.created', (value) => {
    const recipient = (value.data as { recipient: Record<string, unknown> }).recipient
    recipient.email = person.email
    recipient.userId = person.userId
    recipient.displayName = person.name
  })
}

const eventIdOf = (event: { body: string }) => JSON.parse(event.body).envelope.eventId as string

/** Posts an event and waits for its one notification to reach `status`. */
async function notify(person: Person, status: string) {
  const event = responseTo(person)
  expect((await postIngest({ events: [event] })).status).toBe(202)
  return eventually(async () => {
    const [row] = await notificationsOf(eventIdOf(event))
    expect(row?.status).toBe(status)
    return row as NonNullable<typeof row>
  })
}

/** Stores a dead letter of notify-events through the dead-letter consumer, as the pipeline would. */
async function deadLetter(message: unknown): Promise<void> {
  const envelope = {
    notifyEdgeDeadLetter: 1,
    queue: 'notify-events',
    code: 'NTF_INVALID_PAYLOAD',
    error: 'data.projectId: Invalid input',
    attempts: 1,
    failureId: guid(),
    failedAt: new Date().toISOString(),
    message,
  }
  createExecutionContext()
  await worker.queue(
    createMessageBatch('notify-dlq', [{ id: `dlq-${guid()}`, timestamp: new Date(), attempts: 1, body: envelope }]),
    env,
  )
}

type Person = { userId: string; email: string; name: string }

/** Someone with a trace in every table an erasure reaches. */
async function personEverywhere(): Promise<Person & { sentId: string; pendingId: string }> {
  const tag = guid().slice(0, 8)
  const person = { userId: guid(), email: `Erase.Me-${tag}@Example.com`, name: `Erased Person ${tag}` }
  const lower = person.email.toLowerCase()
  expect(
    (await call('PUT', `/v1/contacts/${person.userId}`, { email: person.email, displayName: person.name })).status,
  ).toBe(200)
  expect(
    (
      await call('PUT', `/v1/preferences/${person.userId}`, {
        preferences: [{ kind: 'InvitationCreated', channel: 'email', enabled: false }],
      })
    ).status,
  ).toBe(200)
  expect((await call('PUT', `/v1/reviewers/${person.userId}`)).status).toBe(200)
  // A sent email (an optional kind: it carries an unsubscribe link), its raw MIME, then a hard bounce.
  const sent = await notify(person, 'sent')
  const provider = await env.DB.prepare('SELECT provider_id FROM notifications WHERE id = ?1')
    .bind(sent.id)
    .first<{ provider_id: string }>()
  await env.EMAIL_EVENTS.send({
    type: 'cf.email.sending.message.bounced',
    source: { type: 'email.sending', zoneId: '023e105f4ecef8ad9ca31a8372d0c353', domain: 'notify-edge.example' },
    payload: {
      eventId: guid(),
      messageId: String(provider?.provider_id).replace(/^<|>$/g, ''),
      sender: 'notifications@notify-edge.example',
      recipient: person.email,
      subject: 'Новый отклик на ваш проект',
      terminal: true,
      delivery: { status: 'bounced', smtpStatusCode: '550', smtpEnhancedStatusCode: '5.1.1' },
      bounce: { type: 'hard', classification: 'permanent_failure', reason: `550 5.1.1 <${person.email}> unknown` },
    },
    metadata: {
      accountId: 'f9f79265f388666de8122cfb508d7776',
      eventSubscriptionId: '1830c4bb612e43c3af7f4cada31fbf3f',
      eventSchemaVersion: 1,
      eventTimestamp: new Date().toISOString(),
    },
  })
  await eventually(async () =>
    expect(await env.DB.prepare('SELECT cause FROM suppressions WHERE address = ?1').bind(lower).first()).toEqual({
      cause: 'hard-bounce',
    }),
  )
  // An operator's change whose audit target is the address.
  expect(
    (await call('PUT', `/v1/suppressions/${encodeURIComponent(lower)}`, { reason: 'asked us to stop' })).status,
  ).toBe(200)
  // A notification still to be sent (due in the future), written as materialize would.
  const pendingId = `ntf-pending-${tag}`
  await env.DB.prepare(
    `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
       recipient_email, recipient_name, subject, text_body, html_body, status, scheduled_at, enqueued_at, created_at,
       updated_at)
     VALUES (?1, ?1, ?1, 'http', 'ResponseCreated', 'email', 'low', ?2, ?3, ?4, 'Subject', 'Text', '<p>HTML</p>',
       'pending', '2100-01-01T00:00:00.000Z', ?5, ?5, ?5)`,
  )
    .bind(pendingId, person.userId, person.email, person.name, new Date().toISOString())
    .run()
  // Dead letters whose message names them: one readable, one whose body travelled as base64 (not UTF-8).
  await deadLetter(
    inbound({ data: { recipient: { userId: person.userId, email: person.email, displayName: person.name } } }),
  )
  const bytes = new Uint8Array([
    0xff,
    ...new TextEncoder().encode(JSON.stringify({ to: person.email, name: person.name })),
  ])
  await deadLetter(inbound({}, {}, { body: btoa(String.fromCharCode(...bytes)), encoding: 'base64' }))
  return { ...person, sentId: sent.id, pendingId }
}

/** Every text of every column of every table of the database that holds `needle` (any case), as "table.column". */
async function tracesOf(needle: string): Promise<string[]> {
  const { results: tables } = await env.DB.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'",
  ).all<{ name: string }>()
  const found: string[] = []
  for (const { name: table } of tables) {
    const { results: columns } = await env.DB.prepare(`PRAGMA table_info("${table}")`).all<{ name: string }>()
    for (const { name: column } of columns) {
      const hit = await env.DB.prepare(
        `SELECT count(*) AS n FROM "${table}" WHERE instr(lower(CAST("${column}" AS TEXT)), lower(?1)) > 0`,
      )
        .bind(needle)
        .first<{ n: number }>()
      if (hit?.n) found.push(`${table}.${column}`)
    }
  }
  return found
}

/** A console session of `token`: a caller that keeps its cookie, and the form token of its pages. */
async function consoleAs(token: string) {
  const vars = { ...env, VIEWER_TOKEN } as Env
  const raw = (path: string, init: RequestInit = {}) =>
    worker.fetch(new Request(`http://worker${path}`, { redirect: 'manual', ...init }), vars, createExecutionContext())
  const signedIn = await raw('/console/sign-in', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
    body: new URLSearchParams({ token }).toString(),
  })
  const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
  const page = async (path: string) => (await raw(path, { headers: { cookie } })).text()
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await page('/console/erasures'))?.[1] ?? ''
  const post = async (path: string, form: Record<string, string>) => {
    const answer = await raw(path, {
      method: 'POST',
      headers: { cookie, origin: 'http://worker', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...form, _csrf: csrf }).toString(),
    })
    return { status: answer.status, text: await answer.text() }
  }
  return { page, post }
}

const auditOfErasure = async (target: string) =>
  (await call('GET', `/v1/audit?action=recipient.erase&target=${encodeURIComponent(target)}`)).body
    .items as AuditRecord[]

describe('erasure', () => {
  it('by user id leaves no trace of the address or the name in any table; the bounced address stays suppressed', async () => {
    const person = await personEverywhere()
    expect(await tracesOf(person.email)).not.toEqual([])

    const answer = await call('POST', '/v1/erasures', { userId: person.userId })
    expect(answer.status).toBe(200)
    expect(answer.body.target).toBe(person.userId)
    expect(answer.body.erased).toEqual({
      sentMessages: 1,
      deliveryEvents: 1,
      // The response's notification, the digest it was collected in (closed with it alone), the pending one.
      notifications: 3,
      deadLetters: 2,
      suppressions: 1,
      contacts: 1,
      preferences: 1,
      reviewers: 1,
      // The operator's suppression.put; the suppression.delete, contact and preference rows name the user id.
      auditTargets: 1,
    })
    expect(await tracesOf(person.email)).toEqual([])
    expect(await tracesOf(person.name)).toEqual([])

    // The rows stay, with ids, status and times: the sent one is still sent; the pending one ends undeliverable.
    const sent = await call('GET', `/v1/notifications/${person.sentId}`)
    expect(sent.body).toMatchObject({
      status: 'sent',
      deliveryStatus: 'bounced',
      recipientEmail: null,
      subject: null,
      text: null,
      html: null,
      unsubscribeUrl: null,
      sentMessage: null,
      contentRemoved: { by: 'erasure' },
    })
    expect((sent.body.timeline as { status: string; detail: unknown }[]).map((event) => event)).toMatchObject([
      { status: 'bounced', detail: {} },
    ])
    expect((await call('GET', `/v1/notifications/${person.pendingId}`)).body).toMatchObject({
      status: 'undeliverable',
      statusReason: 'the recipient was erased before it was sent',
    })

    // The audit row of the erasure: who, the user id, the counts (their sum: 12) — no address.
    const [row] = await auditOfErasure(person.userId)
    expect(row).toMatchObject({ actor: 'admin token', role: 'admin', via: 'api', affected: 12 })
    expect(row?.parameters).toEqual({ by: 'userId', erased: answer.body.erased })

    // A later event to the erased address is still suppressed: the gate matches the pseudonym.
    const later = await notify(person, 'suppressed')
    expect(later.error_code).toBe('NTF_RECIPIENT_SUPPRESSED')
    const kept = await call('GET', `/v1/suppressions/${encodeURIComponent(person.email)}`)
    expect(kept.status).toBe(200)
    expect(kept.body).toMatchObject({ cause: 'operator', active: true })
    expect(kept.body.address).toMatch(/^hmac:[0-9a-f]{64}$/)

    // Erasing again finds the new notification and its digest only (the event brought the address back),
    // then nothing.
    expect((await call('POST', '/v1/erasures', { userId: person.userId })).body.erased).toMatchObject({
      notifications: 2,
      suppressions: 0,
    })
    const third = await call('POST', '/v1/erasures', { userId: person.userId })
    expect(third.status).toBe(200)
    expect(Object.values(third.body.erased as object).every((count) => count === 0)).toBe(true)
    expect(await auditOfErasure(person.userId)).toHaveLength(2)
    expect(await tracesOf(person.email)).toEqual([])
  })

  it('a dead letter still on its way to notify-dlq when its recipient is erased is stored as the erasure leaves one', async () => {
    const tag = guid().slice(0, 8)
    const person = { userId: guid(), email: `Late.Letter-${tag}@Example.com`, name: `Late Letter ${tag}` }
    expect((await call('PUT', `/v1/contacts/${person.userId}`, { email: person.email })).status).toBe(200)
    const before = new Date(Date.now() - 60_000).toISOString()
    expect((await call('POST', '/v1/erasures', { userId: person.userId })).status).toBe(200)
    const after = new Date(Date.now() + 60_000).toISOString()

    // Received before the erasure: one naming the user id and the name, one the address alone (in another
    // case, its body in base64).
    // The first also carries a long run with no delimiter in it, about as large as ingest takes: read in one
    // pass (a regular expression for addresses backtracked over such a run from every start, for minutes).
    const byUser = inbound(
      { data: { recipient: { userId: person.userId, displayName: person.name }, note: 'x'.repeat(120_000) } },
      {},
      { receivedAt: before },
    )
    const byAddress = inbound(
      {},
      {},
      {
        body: btoa(JSON.stringify({ to: person.email.toUpperCase() })),
        encoding: 'base64',
        receivedAt: before,
      },
    )
    // Received after it: new data, kept as it is.
    const newer = inbound({ data: { recipient: { userId: person.userId } } }, {}, { receivedAt: after })
    for (const message of [byUser, byAddress, newer]) await deadLetter(message)
    const rows = async () =>
      (
        await env.DB.prepare(
          `SELECT source_message_id, body, status, discard_reason FROM dead_letters
           WHERE source_message_id IN (?1, ?2, ?3) ORDER BY source_message_id`,
        )
          .bind(byUser.sourceMessageId, byAddress.sourceMessageId, newer.sourceMessageId)
          .all<{ source_message_id: string; body: string; status: string; discard_reason: string | null }>()
      ).results
    const stored = new Map((await rows()).map((row) => [row.source_message_id, row]))
    for (const late of [byUser, byAddress]) {
      expect(stored.get(late.sourceMessageId)).toMatchObject({
        status: 'discarded',
        discard_reason: 'its recipient was erased',
      })
      expect(JSON.parse(stored.get(late.sourceMessageId)?.body ?? '{}')).toMatchObject({ notifyEdgeErased: 1 })
    }
    expect(stored.get(newer.sourceMessageId)).toMatchObject({ status: 'open', discard_reason: null })
    expect(stored.get(newer.sourceMessageId)?.body).toContain(person.userId)
    expect(await tracesOf(person.name)).toEqual([])
    expect(await tracesOf(person.email)).toEqual([])

    // A message of another queue naming the address in its error only: the error goes, whenever it failed.
    const dispatchLetter = {
      notifyEdgeDeadLetter: 1,
      queue: 'notify-dispatch',
      code: 'NTF_PROVIDER_REJECTED',
      error: `the provider refused <${person.email}>`,
      attempts: 3,
      failureId: guid(),
      failedAt: after,
      message: { notificationId: `ntf-${tag}`, attempt: 3 },
    }
    createExecutionContext()
    await worker.queue(
      createMessageBatch('notify-dlq', [
        { id: `dlq-${guid()}`, timestamp: new Date(), attempts: 1, body: dispatchLetter },
      ]),
      env,
    )
    expect(
      await env.DB.prepare('SELECT error, status FROM dead_letters WHERE failure_id = ?1')
        .bind(dispatchLetter.failureId)
        .all(),
    ).toMatchObject({ results: [{ error: 'the error named an erased recipient', status: 'discarded' }] })
    expect(await tracesOf(person.email)).toEqual([])
  })

  it('by user id still finds an address left only on the suppression list, once retention deleted their notifications', async () => {
    const person = await personEverywhere()
    // Retention deleted the notifications with their delivery events and kept messages (as
    // src/notifications/prune.ts does), and the contact moved to a new
    // address: the old one is left on the suppression list (its bounce's entry, which the operator's
    // change replaced since) and in dead letters.
    await env.DB.batch([
      env.DB.prepare(
        'DELETE FROM delivery_events WHERE notification_id IN (SELECT id FROM notifications WHERE recipient_user_id = ?1)',
      ).bind(person.userId),
      env.DB.prepare(
        'DELETE FROM sent_messages WHERE notification_id IN (SELECT id FROM notifications WHERE recipient_user_id = ?1)',
      ).bind(person.userId),
      env.DB.prepare('DELETE FROM notifications WHERE recipient_user_id = ?1').bind(person.userId),
    ])
    const moved = `moved-${guid().slice(0, 8)}@example.com`
    expect(
      (await call('PUT', `/v1/contacts/${person.userId}`, { email: moved, displayName: person.name })).status,
    ).toBe(200)
    expect(await tracesOf(person.email)).not.toEqual([])

    const answer = await call('POST', '/v1/erasures', { userId: person.userId })
    expect(answer.status).toBe(200)
    expect(await tracesOf(person.email)).toEqual([])
    expect(await tracesOf(moved)).toEqual([])
  })

  it('by address finds the same person: every trace goes, and the audit trail names only the pseudonym', async () => {
    const person = await personEverywhere()
    const answer = await call('POST', '/v1/erasures', { address: person.email.toUpperCase() })
    expect(answer.status).toBe(200)
    const target = String(answer.body.target)
    expect(target).toMatch(/^hmac:[0-9a-f]{64}$/)
    expect(answer.body.erased).toMatchObject({ contacts: 1, notifications: 3, suppressions: 1, auditTargets: 1 })
    expect(await tracesOf(person.email)).toEqual([])
    expect(await tracesOf(person.name)).toEqual([])
    // The operator's old suppression.put now names the pseudonym, as does the erasure itself.
    const targets = (await call('GET', `/v1/audit?target=${encodeURIComponent(target)}`)).body.items as AuditRecord[]
    expect(targets.map((entry) => entry.action).sort()).toEqual(['recipient.erase', 'suppression.put'])
    expect((await call('GET', `/v1/suppressions/${encodeURIComponent(person.email)}`)).body.address).toBe(target)
    await notify(person, 'suppressed')
  })

  it('is refused to a viewer (403), which changes nothing', async () => {
    const userId = guid()
    const email = `viewer-erase-${guid().slice(0, 8)}@example.com`
    expect((await call('PUT', `/v1/contacts/${userId}`, { email })).status).toBe(200)
    const refused = await call('POST', '/v1/erasures', { userId }, VIEWER_TOKEN)
    expect(refused.status).toBe(403)
    expect(refused.body.error?.code).toBe('FORBIDDEN')
    expect((await call('GET', `/v1/contacts/${userId}`)).status).toBe(200)
    expect(await auditOfErasure(userId)).toEqual([])
  })

  it('from the console: an admin erases behind a confirmation and sees the counts; a viewer has no form and is refused', async () => {
    const userId = guid()
    const email = `console-erase-${guid().slice(0, 8)}@example.com`
    expect((await call('PUT', `/v1/contacts/${userId}`, { email, displayName: 'Console Erased' })).status).toBe(200)

    const viewer = await consoleAs(VIEWER_TOKEN)
    expect(await viewer.page('/console/erasures')).not.toMatch(/<form method="post" action="\/console\/erasures"/)
    expect((await viewer.post('/console/erasures', { who: userId, confirm: 'yes' })).status).toBe(403)

    const admin = await consoleAs(ADMIN_TOKEN)
    expect(await admin.page(`/console/contacts?userId=${userId}`)).toContain(`/console/erasures?userId=${userId}`)
    expect(await admin.page(`/console/erasures?userId=${userId}`)).toContain(`value="${userId}"`)
    expect((await admin.post('/console/erasures', { who: userId })).status).toBe(400)
    expect((await call('GET', `/v1/contacts/${userId}`)).status).toBe(200)

    const done = await admin.post('/console/erasures', { who: email, confirm: 'yes' })
    expect(done.status).toBe(200)
    const target = /names this recipient <code>(hmac:[0-9a-f]{64})<\/code>/.exec(done.text)?.[1] ?? ''
    expect(target).not.toBe('')
    expect(done.text).not.toContain(email)
    expect((await call('GET', `/v1/contacts/${userId}`)).status).toBe(404)
    expect(await auditOfErasure(target)).toMatchObject([{ via: 'console', actor: 'admin token', affected: 1 }])
  })

  it('refuses a body that names nobody, or both a user id and an address', async () => {
    for (const body of [
      {},
      { userId: 'not-a-guid' },
      { address: 'nope' },
      { userId: guid(), address: 'a@example.com' },
    ]) {
      const answer = await call('POST', '/v1/erasures', body)
      expect(answer.status, JSON.stringify(body)).toBe(400)
    }
  })

  it('the audit trail lets through only an address becoming its pseudonym', async () => {
    const { id } = (await env.DB.prepare(
      `INSERT INTO audit_log (at, actor, role, via, action, target, affected)
       VALUES (?1, 'admin token', 'admin', 'api', 'test.trigger', 'someone@example.com', 1) RETURNING id`,
    )
      .bind(new Date().toISOString())
      .first<{ id: number }>()) as { id: number }
    const update = (set: string) => env.DB.prepare(`UPDATE audit_log SET ${set} WHERE id = ?1`).bind(id).run()
    await expect(update("target = 'someone-else@example.com'")).rejects.toThrow(/never changed/)
    await expect(update("target = 'hmac:00', affected = 2")).rejects.toThrow(/never changed/)
    await update("target = 'hmac:00'")
    // Once a pseudonym, it stays one.
    await expect(update("target = 'hmac:11'")).rejects.toThrow(/never changed/)
  })
})
