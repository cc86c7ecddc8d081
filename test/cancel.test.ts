/**
 * Cancel by key: an event's notifications that have not gone out are
 * withdrawn by a later event of a cancelling type (invitation.withdrawn
 * cancels invitation.created of the same invitation) or by
 * `POST /v1/cancellations` — pending, held by quiet hours, waiting to
 * escalate, a digest's member still collecting; an in-app item already shown
 * leaves its feed; a cancellation that comes first leaves its event nothing to
 * create; a cancellation racing a send is decided once, never "cancelled" and
 * sent. Through the real notify-events and notify-dispatch consumers, D1 and
 * the INBOX Durable Object.
 */
import { env } from 'cloudflare:workers'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { consume, digestsOf, membersOf, ownerWho, response, windowPassed } from './digests.ts'
import { FAKE_RESEND_URL } from './fake-resend.ts'
import {
  ADMIN_TOKEN,
  adminCall,
  deliverBatch,
  dispatchBatch,
  dispatchOnce,
  eventually,
  freshInbound,
  guid,
  inAppFor,
  pendingNotification,
  quietAroundNow,
  runCron,
} from './helpers.ts'
import { dbOfUser } from './shards.ts'

type Row = { id: string; channel: string; status: string; status_reason: string | null; digest_id: string | null }

type Report = {
  key: string
  cancelledAt: string
  source: string
  notifications: { id: string; channel: string; status: string; outcome: string }[]
}

async function rowsOf(eventId: string): Promise<Row[]> {
  const { results } = await env.DB.prepare(
    'SELECT id, channel, status, status_reason, digest_id FROM notifications WHERE event_id = ?1 ORDER BY channel',
  )
    .bind(eventId)
    .all<Row>()
  return results
}

async function sentCount(id: string): Promise<number> {
  const row = await env.DB.prepare('SELECT count(*) AS n FROM sent_messages WHERE notification_id = ?1')
    .bind(id)
    .first<{ n: number }>()
  return row?.n ?? 0
}

async function outcomeOf(eventId: string): Promise<string | undefined> {
  const row = await env.DB.prepare('SELECT outcome FROM processed_marks WHERE event_id = ?1')
    .bind(eventId)
    .first<{ outcome: string }>()
  return row?.outcome
}

/** An invitation to a new specialist, and the event that withdraws it. */
function invitation() {
  const invitationId = guid()
  const userId = guid()
  let created = ''
  let withdrawn = ''
  const create = freshInbound('invitation.created', (value) => {
    const data = value.data as Record<string, unknown>
    data.invitationId = invitationId
    data.recipient = { userId, email: `invited-${userId.slice(0, 8)}@example.com`, displayName: 'Михаил Дизайнер' }
    created = (value.envelope as { eventId: string }).eventId
  })
  const withdraw = freshInbound('invitation.withdrawn', (value) => {
    ;(value.data as Record<string, unknown>).invitationId = invitationId
    withdrawn = (value.envelope as { eventId: string }).eventId
  })
  return { invitationId, userId, create, withdraw, created, withdrawn, key: `invitation:${invitationId}` }
}

function cancel(key: string, reason?: string) {
  return adminCall<Report>('POST', '/v1/cancellations', { key, ...(reason ? { reason } : {}) })
}

describe('cancel by key', () => {
  it('an invitation withdrawn while its email waits for quiet hours to end: the email never goes', async () => {
    const { create, withdraw, created, withdrawn } = invitation()
    // Written held by quiet hours: pending, due two hours from now.
    await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: create }], 'notify-events', quietAroundNow())
    const [email] = await rowsOf(created)
    expect(email).toMatchObject({ channel: 'email', status: 'pending' })
    await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: withdraw }], 'notify-events')
    expect(await outcomeOf(withdrawn)).toBe('cancellation')
    const [after] = await rowsOf(created)
    expect(after?.status).toBe('cancelled')
    expect(after?.status_reason).toContain('the invitation was withdrawn')
    // Its message comes at the end of the quiet hours: nothing is sent.
    await env.DB.prepare('UPDATE notifications SET scheduled_at = ?2 WHERE id = ?1')
      .bind(email?.id, new Date().toISOString())
      .run()
    await dispatchOnce({ notificationId: email?.id as string })
    expect(await sentCount(email?.id as string)).toBe(0)
    expect((await rowsOf(created))[0]?.status).toBe('cancelled')
    // The story says so.
    const story = await adminCall<{ notifications: { status: string }[] }>('GET', `/v1/events/${created}`)
    expect(story.body.notifications.map((n) => n.status)).toEqual(['cancelled'])
  })

  it('a withdrawal that arrives before its invitation leaves the invitation nothing to create', async () => {
    const { create, withdraw, created, withdrawn } = invitation()
    await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: withdraw }], 'notify-events')
    expect(await outcomeOf(withdrawn)).toBe('cancellation')
    await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: create }], 'notify-events')
    expect(await outcomeOf(created)).toBe('cancelled')
    expect(await rowsOf(created)).toEqual([])
  })

  it('a cancellation racing the claims of its emails: each is either cancelled and never sent, or sent and reported in flight', async () => {
    const made = Array.from({ length: 8 }, () => invitation())
    await deliverBatch(
      made.map(({ create }) => ({ id: `m-${guid()}`, attempts: 1, body: create })),
      'notify-events',
      quietAroundNow(),
    )
    const emails = await Promise.all(made.map(async ({ created }) => (await rowsOf(created))[0] as Row))
    // Due now: their messages and the cancellations go at once.
    for (const email of emails) {
      await env.DB.prepare('UPDATE notifications SET scheduled_at = ?2 WHERE id = ?1')
        .bind(email.id, new Date().toISOString())
        .run()
    }
    const [, ...reports] = await Promise.all([
      dispatchBatch(emails.map((email) => ({ notificationId: email.id }))),
      ...made.map(({ key }) => cancel(key)),
    ])
    for (const [index, email] of emails.entries()) {
      const outcome = reports[index]?.body.notifications[0]?.outcome
      const row = (await rowsOf(made[index]?.created as string))[0] as Row
      const sent = await sentCount(email.id)
      if (outcome === 'cancelled') {
        expect(row.status).toBe('cancelled')
        expect(sent).toBe(0)
      } else {
        // The claim came first: the cancellation says so, and the email went once.
        expect(['in-flight', 'too-late']).toContain(outcome)
        await eventually(async () => expect((await rowsOf(made[index]?.created as string))[0]?.status).toBe('sent'))
        expect(await sentCount(email.id)).toBe(1)
      }
    }
  })

  it('an email in flight whose try fails is cancelled at its retry; one that may have gone is sent, never cancelled', async () => {
    const [failed, maybe] = [invitation(), invitation()]
    await deliverBatch(
      [failed, maybe].map(({ create }) => ({ id: `m-${guid()}`, attempts: 1, body: create })),
      'notify-events',
      quietAroundNow(),
    )
    const [a, b] = await Promise.all([failed, maybe].map(async ({ created }) => (await rowsOf(created))[0] as Row))
    const now = new Date().toISOString()
    const lease = new Date(Date.now() + 60_000).toISOString()
    // Both claimed by another delivery as the cancellations come.
    for (const row of [a, b]) {
      await env.DB.prepare(
        "UPDATE notifications SET status = 'sending', claim_token = 'other', lease_until = ?2, claimed_at = ?3 WHERE id = ?1",
      )
        .bind(row?.id, lease, now)
        .run()
    }
    const reports = await Promise.all([cancel(failed.key), cancel(maybe.key)])
    expect(reports.map((report) => report.body.notifications[0]?.outcome)).toEqual(['in-flight', 'in-flight'])
    // That delivery's tries end: one refused before it left (nothing went), one whose answer was lost.
    await env.DB.prepare(
      "UPDATE notifications SET status = 'pending', claim_token = NULL, lease_until = NULL, scheduled_at = ?2 WHERE id = ?1",
    )
      .bind(a?.id, now)
      .run()
    await env.DB.prepare(
      "UPDATE notifications SET status = 'pending', claim_token = NULL, lease_until = NULL, scheduled_at = ?2, maybe_sent_at = ?2 WHERE id = ?1",
    )
      .bind(b?.id, now)
      .run()
    await dispatchBatch([{ notificationId: a?.id as string }, { notificationId: b?.id as string }])
    expect((await rowsOf(failed.created))[0]).toMatchObject({
      status: 'cancelled',
      status_reason: 'cancelled while it was in flight; its retry is not sent',
    })
    expect(await sentCount(a?.id as string)).toBe(0)
    expect((await rowsOf(maybe.created))[0]?.status).toBe('sent')
    expect(await sentCount(b?.id as string)).toBe(1)
  })

  it('a member of a digest still collecting leaves it; the digest closes without it, and one left empty sends nothing', async () => {
    const owner = await ownerWho('digest')
    const key = `response:${guid()}`
    const keep = response(owner, 'Остаётся')
    const drop = response(owner, 'Отозван')
    const dropped = JSON.parse(drop.message.body)
    dropped.envelope.cancellationKey = key
    await consume([keep.message, { ...drop.message, body: JSON.stringify(dropped) }])
    const [digest] = await digestsOf(owner.userId)
    expect((await membersOf(digest?.id as string)).map((member) => member.event_id).sort()).toEqual(
      [keep.eventId, drop.eventId].sort(),
    )
    const report = await cancel(key, 'the response was deleted')
    expect(report.body.notifications.map((n) => n.outcome)).toEqual(['cancelled'])
    expect((await rowsOf(drop.eventId))[0]).toMatchObject({ status: 'cancelled', digest_id: null })
    expect((await membersOf(digest?.id as string)).map((member) => member.event_id)).toEqual([keep.eventId])
    // It closes with the one left, which goes as itself.
    const due = await windowPassed(digest?.id as string)
    const closed = await dispatchOnce({ notificationId: digest?.id as string, due })
    const keptId = (await rowsOf(keep.eventId))[0]?.id as string
    expect(closed.enqueued.map((message) => message.body.notificationId)).toEqual([keptId])

    // A digest whose only member is cancelled sends nothing.
    const alone = await ownerWho('digest')
    const lone = response(alone, 'Один')
    const loneBody = JSON.parse(lone.message.body)
    loneBody.envelope.cancellationKey = `response:${guid()}`
    await consume([{ ...lone.message, body: JSON.stringify(loneBody) }])
    const [empty] = await digestsOf(alone.userId)
    await cancel(loneBody.envelope.cancellationKey)
    const emptyDue = await windowPassed(empty?.id as string)
    const closedEmpty = await dispatchOnce({ notificationId: empty?.id as string, due: emptyDue })
    expect(closedEmpty.enqueued).toEqual([])
    expect((await digestsOf(alone.userId))[0]?.status).not.toBe('pending')
    expect(await sentCount(empty?.id as string)).toBe(0)
  })

  it('answers the same when said again, audits it, and refuses a request without a key', async () => {
    const { create, key, created } = invitation()
    await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: create }], 'notify-events', quietAroundNow())
    const first = await cancel(key)
    const again = await cancel(key)
    expect(first.status).toBe(200)
    expect(again.body).toEqual(first.body)
    expect(first.body.notifications).toMatchObject([
      { channel: 'email', status: 'cancelled', outcome: 'cancelled', unconfirmedThrough: [] },
    ])
    const audited = await env.DB.prepare(
      "SELECT count(*) AS n FROM audit_log WHERE action = 'cancellation.create' AND target = ?1",
    )
      .bind(key)
      .first<{ n: number }>()
    expect(audited?.n).toBe(2)
    expect((await rowsOf(created))[0]?.status).toBe('cancelled')
    const refused = await adminCall<{ error: { code: string; issues: { field: string }[] } }>(
      'POST',
      '/v1/cancellations',
      { reason: 'no key' },
    )
    expect(refused.status).toBe(400)
    expect(refused.body.error.issues.map((issue) => issue.field)).toContain('key')
  })

  it('a member of a bundle never requested (its pace put it off) is withdrawn; the bundle goes without it', async () => {
    const [a, b] = [invitation(), invitation()]
    await deliverBatch(
      [a, b].map(({ create }) => ({ id: `m-${guid()}`, attempts: 1, body: create })),
      'notify-events',
      quietAroundNow(),
    )
    const [ea, eb] = await Promise.all([a, b].map(async ({ created }) => (await rowsOf(created))[0] as Row))
    const batchId = `bat_${guid().replaceAll('-', '')}`
    const now = new Date().toISOString()
    // What the pace leaves of a bundle it had no slot for: pending, in its bundle, nothing requested.
    await env.DB.batch([
      env.DB.prepare("INSERT INTO send_batches (id, transport, size, created_at) VALUES (?1, 'resend', 2, ?2)").bind(
        batchId,
        now,
      ),
      ...[ea, eb].map((row, position) =>
        env.DB.prepare(
          'UPDATE notifications SET batch_id = ?2, batch_position = ?3, scheduled_at = ?4, send_attempts = 0 WHERE id = ?1',
        ).bind(row?.id, batchId, position, now),
      ),
    ])
    const report = await cancel(a.key)
    expect(report.body.notifications.map((n) => n.outcome)).toEqual(['cancelled'])
    const resend = { EMAIL_TRANSPORT: 'resend', RESEND_API_KEY: 'test-resend-key', RESEND_API_URL: FAKE_RESEND_URL }
    await dispatchBatch([{ notificationId: ea?.id as string }, { notificationId: eb?.id as string }], resend)
    expect((await rowsOf(a.created))[0]?.status).toBe('cancelled')
    expect(await sentCount(ea?.id as string)).toBe(0)
    expect((await rowsOf(b.created))[0]?.status).toBe('sent')
    expect(await sentCount(eb?.id as string)).toBe(1)
  })

  it('an email withdrawn gives its throttle place back: the next one goes at once', async () => {
    const owner = await ownerWho('instant')
    const key = `response:${guid()}`
    const keyed = (title: string, withKey: boolean) => {
      const made = response(owner, title)
      const body = JSON.parse(made.message.body)
      if (withKey) body.envelope.cancellationKey = key
      return { eventId: made.eventId, message: { ...made.message, body: JSON.stringify(body) } }
    }
    // Five, held by quiet hours, take the five places of the owner's hour.
    const five = Array.from({ length: 5 }, (_, index) => keyed(`Проект ${index}`, true))
    await deliverBatch(
      five.map(({ message }) => ({ id: `m-${guid()}`, attempts: 1, body: message })),
      'notify-events',
      quietAroundNow(),
    )
    for (const one of five) expect((await rowsOf(one.eventId))[0]?.status).toBe('pending')
    await cancel(key)
    const places = await env.DB.prepare('SELECT places FROM throttle_windows WHERE user_id = ?1')
      .bind(owner.userId)
      .first<{ places: string }>()
    expect(JSON.parse(places?.places ?? '[]')).toEqual([])
    const sixth = keyed('Шестой', false)
    await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: sixth.message }], 'notify-events', quietAroundNow())
    expect((await rowsOf(sixth.eventId))[0]?.status).toBe('pending')
  })

  it('gives back one place per email withdrawn, though emails written together share their place’s time', async () => {
    const owner = await ownerWho('instant')
    const key = `response:${guid()}`
    const five = Array.from({ length: 5 }, (_, index) => {
      const made = response(owner, `Проект ${index}`)
      const body = JSON.parse(made.message.body)
      if (index === 0) body.envelope.cancellationKey = key
      return { id: `m-${guid()}`, attempts: 1, body: { ...made.message, body: JSON.stringify(body) } }
    })
    await deliverBatch(five, 'notify-events', quietAroundNow())
    const placesOf = async () =>
      JSON.parse(
        (
          await env.DB.prepare('SELECT places FROM throttle_windows WHERE user_id = ?1')
            .bind(owner.userId)
            .first<{ places: string }>()
        )?.places ?? '[]',
      ) as string[]
    const before = await placesOf()
    expect(before).toHaveLength(5)
    expect(new Set(before).size).toBe(1)
    await cancel(key)
    expect(await placesOf()).toEqual(before.slice(1))
  })

  it('withdraws an email waiting for its contact and one held by a paused transport', async () => {
    const key = `task:${guid()}`
    const [waiting, paused] = await Promise.all([
      pendingNotification(`contact-${guid().slice(0, 8)}@example.com`),
      pendingNotification(`paused-${guid().slice(0, 8)}@example.com`),
    ])
    await env.DB.batch([
      env.DB.prepare(
        "UPDATE notifications SET status = 'awaiting-contact', recipient_email = NULL, cancellation_key = ?2 WHERE id = ?1",
      ).bind(waiting, key),
      env.DB.prepare("UPDATE notifications SET status = 'paused', cancellation_key = ?2 WHERE id = ?1").bind(
        paused,
        key,
      ),
    ])
    const report = await cancel(key)
    expect(Object.fromEntries(report.body.notifications.map((n) => [n.id, n.outcome]))).toEqual({
      [waiting]: 'cancelled',
      [paused]: 'cancelled',
    })
    const { results } = await env.DB.prepare('SELECT status FROM notifications WHERE id IN (?1, ?2) ORDER BY status')
      .bind(waiting, paused)
      .all<{ status: string }>()
    expect(results.map((row) => row.status)).toEqual(['cancelled', 'cancelled'])
  })

  it('forgets a cancellation after the deduplication horizon (PROCESSED_EVENTS_RETENTION_DAYS), keeping newer ones', async () => {
    const [old, fresh] = [`old:${guid()}`, `fresh:${guid()}`]
    const longAgo = new Date(Date.now() - 8 * 86_400_000).toISOString()
    await env.DB.prepare(
      `INSERT INTO cancellations (key, cancelled_at, source, by) VALUES (?1, ?2, 'api', 'test'), (?3, ?4, 'api', 'test')`,
    )
      .bind(old, longAgo, fresh, new Date().toISOString())
      .run()
    await runCron(new Date())
    const { results } = await env.DB.prepare('SELECT key FROM cancellations WHERE key IN (?1, ?2)')
      .bind(old, fresh)
      .all<{ key: string }>()
    expect(results.map((row) => row.key)).toEqual([fresh])
  })

  it('in bulk by a filter: a dry run lists what would go and changes nothing; then it cancels', async () => {
    const made = [invitation(), invitation()]
    const recipient = made[0]?.userId as string
    await deliverBatch(
      made.map(({ create }) => ({ id: `m-${guid()}`, attempts: 1, body: create })),
      'notify-events',
      quietAroundNow(),
    )
    const dry = await adminCall<{ dryRun: boolean; more: boolean; keys: { key: string; waiting: number }[] }>(
      'POST',
      '/v1/cancellations/bulk',
      { filter: { recipientUserId: recipient } },
    )
    expect(dry.body).toEqual({ dryRun: true, more: false, keys: [{ key: made[0]?.key, waiting: 1, outcomes: null }] })
    expect((await rowsOf(made[0]?.created as string))[0]?.status).toBe('pending')
    const done = await adminCall<{ keys: { key: string; outcomes: Record<string, number> }[] }>(
      'POST',
      '/v1/cancellations/bulk',
      { filter: { recipientUserId: recipient }, dryRun: false },
    )
    expect(done.body.keys).toEqual([{ key: made[0]?.key, waiting: 1, outcomes: { cancelled: 1 } }])
    expect((await rowsOf(made[0]?.created as string))[0]?.status).toBe('cancelled')
    expect((await rowsOf(made[1]?.created as string))[0]?.status).toBe('pending')
    const empty = await adminCall('POST', '/v1/cancellations/bulk', { filter: {} })
    expect(empty.status).toBe(400)
  })
})

describe('cancel by key, in the console', () => {
  it('the event story offers its key; the confirmation cancels it through the API and shows each outcome', async () => {
    const { create, key, created } = invitation()
    await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: create }], 'notify-events', quietAroundNow())
    const { createExecutionContext } = await import('cloudflare:test')
    const { default: worker } = await import('../src/index.ts')
    const call = (target: string, init: RequestInit = {}) =>
      worker.fetch(
        new Request(`http://worker${target}`, { redirect: 'manual', ...init }),
        env,
        createExecutionContext(),
      )
    const signedIn = await call('/console/sign-in', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
      body: new URLSearchParams({ token: ADMIN_TOKEN }).toString(),
    })
    const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
    const story = await (await call(`/console/events/${created}`, { headers: { cookie } })).text()
    const link = /href="(\/console\/cancellations\?key=[^"]+)"/.exec(story)?.[1]?.replaceAll('&amp;', '&')
    expect(link).toBe(`/console/cancellations?key=${encodeURIComponent(key)}&event=${encodeURIComponent(created)}`)
    const confirm = await (await call(link as string, { headers: { cookie } })).text()
    expect(confirm).toContain('has not gone out (1 now)')
    const csrf = /name="_csrf" value="([^"]+)"/.exec(confirm)?.[1] ?? ''
    const done = await call('/console/cancellations', {
      method: 'POST',
      headers: { cookie, origin: 'http://worker', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf, key, reason: 'withdrawn in the console' }).toString(),
    })
    expect(done.status).toBe(200)
    const page = await done.text()
    expect(page).toContain('is cancelled')
    expect(page.replace(/<[^>]+>/g, ' ')).toMatch(/InvitationCreated\s+email\s+\S+\s+cancelled\s+cancelled/)
    expect((await rowsOf(created))[0]?.status).toBe('cancelled')
    const via = await env.DB.prepare("SELECT via FROM audit_log WHERE action = 'cancellation.create' AND target = ?1")
      .bind(key)
      .first<{ via: string }>()
    expect(via?.via).toBe('console')
  })
})

describe('cancel by key, in the inbox', () => {
  beforeAll(() => inAppFor('ResponseCreated', true))
  afterAll(() => inAppFor('ResponseCreated', false))

  it('withdraws an item already shown from its feed, the counts following, and the email waiting to escalate', async () => {
    const owner = await ownerWho('instant')
    const key = `response:${guid()}`
    const made = response(owner, 'Отклик отозван')
    const body = JSON.parse(made.message.body)
    body.envelope.cancellationKey = key
    await consume([{ ...made.message, body: JSON.stringify(body) }])
    const feed = env.INBOX.getByName(owner.userId)
    await eventually(async () => expect((await feed.page({ limit: 10, archived: true })).items).toHaveLength(1))
    expect((await feed.page({ limit: 10, archived: false })).counts).toEqual({ unseen: 1, unread: 1 })
    const report = await cancel(key)
    const byChannel = Object.fromEntries(report.body.notifications.map((n) => [n.channel, n.outcome]))
    expect(byChannel).toEqual({ 'in-app': 'withdrawn', email: 'cancelled' })
    const after = await feed.page({ limit: 10, archived: true })
    expect(after.items).toEqual([])
    expect(after.counts).toEqual({ unseen: 0, unread: 0 })
    expect((await rowsOf(made.eventId)).map((row) => row.status)).toEqual(['cancelled', 'cancelled'])
    // A delivery of the item that was on its way during the withdrawal adds nothing back.
    const inApp = (await rowsOf(made.eventId)).find((row) => row.channel === 'in-app') as Row
    const added = await feed.add({
      notificationId: inApp.id,
      kind: 'ResponseCreated',
      title: 'late',
      body: '',
      link: null,
      action: null,
      createdAt: new Date().toISOString(),
    })
    expect(added.added).toBe(false)
  })

  it('an item on its way to the feed as the cancellation comes ends cancelled, and never stays in the feed', async () => {
    const userId = `withdrawn-${guid()}`
    const key = `response:${guid()}`
    const id = await pendingNotification(`${userId}@example.com`, {
      userId,
      inApp: { title: 'Отклик', body: 'Текст', extras: JSON.stringify({ link: null, action: null }) },
    })
    const db = await dbOfUser(userId)
    const past = new Date(Date.now() - 60_000).toISOString()
    // Claimed by a delivery whose lease then ran out, its answer lost: the take-over adds the item again.
    await db
      .prepare(
        "UPDATE notifications SET cancellation_key = ?2, status = 'sending', claim_token = 'lost', lease_until = ?3, claimed_at = ?3 WHERE id = ?1",
      )
      .bind(id, key, past)
      .run()
    const report = await cancel(key)
    expect(report.body.notifications).toMatchObject([{ id, channel: 'in-app', outcome: 'in-flight' }])
    await dispatchOnce({ notificationId: id })
    const row = await db.prepare('SELECT status, status_reason FROM notifications WHERE id = ?1').bind(id).first()
    expect(row).toEqual({
      status: 'cancelled',
      status_reason: 'withdrawn by a cancellation while it was on its way to the feed',
    })
    expect((await env.INBOX.getByName(userId).page({ limit: 10, archived: true })).items).toEqual([])
  })
})
