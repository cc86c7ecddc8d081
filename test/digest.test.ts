import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import {
  closingDigests,
  type DigestMember,
  digestMembers,
  fenceDigests,
  insertMember,
  openDigest,
} from '../src/notifications/digest.ts'
import { digestsTelling, eventsOfDigest } from '../src/notifications/digest-reads.ts'
import { selectStuckNotifications } from '../src/notifications/stuck.ts'
import { insertThrottled, type ThrottledRow, takePlace } from '../src/notifications/throttle.ts'
import {
  closeAndSend,
  consume,
  digestOwner,
  digestsOf,
  membersOf,
  ownerWho,
  response,
  sentOf,
  windowPassed,
} from './digests.ts'
import {
  ADMIN_TOKEN,
  dispatchBatch,
  dispatchOnce,
  guid,
  notificationsOf,
  parseMime,
  quietAroundNow,
  runCron,
} from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

/**
 * Digests inside workerd with the real local D1 and queues: membership is
 * written with the event (src/notifications/digest.ts), the close is fenced
 * and rendered by the dispatch consumer (src/dispatch/stages/close-digests.ts), and the
 * digest's email is then sent like any notification.
 */

describe('digests', () => {
  it('five responses to one project become one email that lists them, sent once', async () => {
    const owner = await digestOwner()
    const events = Array.from({ length: 5 }, (_, index) =>
      response(owner, 'Редизайн лендинга', ['Михаил', 'Ольга', 'Пётр', 'Ирина', 'Сергей'][index]),
    )
    // Two consumer batches: the first opens the digest, the second joins it.
    const first = await consume(events.slice(0, 2).map((event) => event.message))
    expect(first.explicitAcks).toHaveLength(2)
    await consume(events.slice(2).map((event) => event.message))

    const [digest, ...others] = await digestsOf(owner.userId)
    expect(others).toHaveLength(0)
    expect(digest?.status).toBe('collecting')
    const members = await membersOf(digest?.id as string)
    expect(members.map((member) => member.event_id).sort()).toEqual(events.map((event) => event.eventId).sort())
    expect(members.every((member) => member.status === 'digested')).toBe(true)
    for (const event of events) {
      const [notification] = await notificationsOf(event.eventId)
      expect(notification?.status).toBe('digested')
      expect(await sentOf(notification?.id as string)).toHaveLength(0)
    }

    const due = await windowPassed(digest?.id as string)
    const { sent } = await closeAndSend(digest?.id as string, due)
    expect(sent.explicitAcks).toHaveLength(1)
    const [closed] = await digestsOf(owner.userId)
    expect(closed?.status).toBe('sent')
    expect(closed?.digest_size).toBe(5)
    expect(closed?.recipient_email).toBe(owner.email)
    const [raw, ...again] = await sentOf(digest?.id as string)
    expect(again).toHaveLength(0)
    const mail = parseMime(raw as string)
    expect(mail.headers.subject).toBe('5 новых откликов на ваш проект «Редизайн лендинга»')
    for (const name of ['Михаил', 'Ольга', 'Пётр', 'Ирина', 'Сергей']) expect(mail.text).toContain(name)
    expect(mail.headers['list-unsubscribe']).toContain('/u/')
    // The members stay digested: their email is the digest's.
    expect((await membersOf(digest?.id as string)).every((member) => member.status === 'digested')).toBe(true)
  })

  it('a redelivered event, and one planned again after its processed mark was pruned, joins no digest twice', async () => {
    const owner = await digestOwner()
    const events = [response(owner, 'Проект А'), response(owner, 'Проект Б')]
    await consume(events.map((event) => event.message))
    await consume(
      events.map((event) => event.message),
      2,
    )
    // Its digest has gone out by the time the event comes back: none is open to absorb a second join.
    const [digest] = await digestsOf(owner.userId)
    await closeAndSend(digest?.id as string, await windowPassed(digest?.id as string))
    // Past the KV fast path and the processed mark: the event is planned and written again.
    for (const event of events) {
      const key = `arthunt:response.created:${event.eventId}`
      await env.DB.prepare('DELETE FROM processed_marks WHERE idempotency_key = ?1').bind(key).run()
      await env.IDEMPOTENCY.delete(key)
    }
    await consume(
      events.map((event) => event.message),
      3,
    )
    const digests = await digestsOf(owner.userId)
    expect(digests.map((one) => one.status)).toEqual(['sent'])
    expect(await membersOf(digests[0]?.id as string)).toHaveLength(2)
    expect(await sentOf(digest?.id as string)).toHaveLength(1)
  })

  it('an event that arrives while its digest is being closed opens the next digest', async () => {
    const owner = await digestOwner()
    const early = response(owner, 'Проект')
    await consume([early.message])
    const [first] = await digestsOf(owner.userId)
    // A close in flight: fenced, not yet written.
    await env.DB.prepare("UPDATE notifications SET status = 'closing', scheduled_at = ?2 WHERE id = ?1")
      .bind(first?.id, new Date(Date.now() - 1000).toISOString())
      .run()
    const late = response(owner, 'Проект')
    await consume([late.message])
    const digests = await digestsOf(owner.userId)
    expect(digests.map((digest) => digest.status)).toEqual(['closing', 'collecting'])
    expect((await membersOf(digests[0]?.id as string)).map((member) => member.event_id)).toEqual([early.eventId])
    expect((await membersOf(digests[1]?.id as string)).map((member) => member.event_id)).toEqual([late.eventId])
  })

  it('a digest of one is no digest: its notification goes out as itself, as it would have at once', async () => {
    const owner = await digestOwner()
    const only = response(owner, 'Единственный проект', 'Ольга Иллюстратор')
    await consume([only.message])
    const [digest] = await digestsOf(owner.userId)
    const [member] = await notificationsOf(only.eventId)
    const due = await windowPassed(digest?.id as string)
    const closed = await dispatchOnce({ notificationId: digest?.id as string, due })
    expect(closed.enqueued.map((message) => message.body.notificationId)).toEqual([member?.id])
    await dispatchOnce(closed.enqueued[0]?.body as { notificationId: string; due: string })
    const [sent] = await notificationsOf(only.eventId)
    expect(sent).toMatchObject({ status: 'sent', subject: 'Новый отклик на ваш проект' })
    const [raw, ...again] = await sentOf(member?.id as string)
    expect(again).toHaveLength(0)
    expect(parseMime(raw as string).text).toContain('Ольга Иллюстратор откликнулся на ваш проект «Единственный проект»')
    expect(await sentOf(digest?.id as string)).toHaveLength(0)
    const [superseded] = await digestsOf(owner.userId)
    expect(superseded).toMatchObject({ status: 'superseded', digest_size: 1 })
  })

  it('two messages closing one digest in one batch, and a second close after the first: one close, one email', async () => {
    const owner = await digestOwner()
    await consume([response(owner, 'П1').message, response(owner, 'П2').message])
    const [digest] = await digestsOf(owner.userId)
    const due = await windowPassed(digest?.id as string)
    const body = { notificationId: digest?.id as string, due }
    const closed = await dispatchBatch([body, body])
    expect(closed.enqueued.filter((message) => message.body.notificationId === digest?.id)).toHaveLength(1)
    // A late duplicate of the close message: the digest is pending now, its due time is the send's.
    const late = await dispatchOnce(body)
    expect(late.enqueued).toHaveLength(0)
    await dispatchOnce(closed.enqueued[0]?.body as { notificationId: string; due: string })
    expect(await sentOf(digest?.id as string)).toHaveLength(1)
  })

  it('a close that died after its fence is finished by the cron: the members it fenced, one email', async () => {
    const owner = await digestOwner()
    const events = [response(owner, 'П'), response(owner, 'П')]
    await consume(events.map((event) => event.message))
    const [digest] = await digestsOf(owner.userId)
    const fencedAt = new Date(Date.now() - 10 * 60_000).toISOString()
    await env.DB.prepare(
      "UPDATE notifications SET status = 'closing', scheduled_at = ?2, enqueued_at = ?2, updated_at = ?2 WHERE id = ?1",
    )
      .bind(digest?.id, fencedAt)
      .run()
    await runCron(new Date())
    const stamped = (await digestsOf(owner.userId))[0]
    expect(stamped?.enqueued_at && stamped.enqueued_at > fencedAt).toBe(true)
    // The cron's message reaches the real consumer, which closes and sends it.
    await expect
      .poll(async () => (await digestsOf(owner.userId))[0]?.status, { timeout: 30_000, interval: 100 })
      .toBe('sent')
    expect(await sentOf(digest?.id as string)).toHaveLength(1)
    expect((await digestsOf(owner.userId))[0]?.digest_size).toBe(2)
  })

  it('a digest whose template fails ends failed and dead-lettered; replayed once fixed, it is sent', async () => {
    const owner = await digestOwner()
    await consume([response(owner, 'А').message, response(owner, 'Б').message])
    const [digest] = await digestsOf(owner.userId)
    const stored = await env.DB.prepare(
      `INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at)
       VALUES ('ResponseCreated.digest', 'ru', 'email', 9001, '{{ count | no_such_filter }}', 'x', 'x', 1, ?1)`,
    )
      .bind(new Date().toISOString())
      .run()
    expect(stored.success).toBe(true)
    try {
      const due = await windowPassed(digest?.id as string)
      const closed = await dispatchOnce({ notificationId: digest?.id as string, due })
      expect(closed.enqueued).toHaveLength(0)
      const [failed] = await digestsOf(owner.userId)
      expect(failed?.status).toBe('failed')
      expect(failed?.error_code).toBe('NTF_TEMPLATE_INVALID')
    } finally {
      await env.DB.prepare("DELETE FROM templates WHERE kind = 'ResponseCreated.digest' AND version = 9001").run()
    }
    // The dead letter reaches the operator; its replay closes the digest again, with the template fixed.
    const deadLetterOf = async () =>
      await env.DB.prepare(
        "SELECT id FROM dead_letters WHERE queue = 'notify-dispatch' AND json_extract(body, '$.notificationId') = ?1",
      )
        .bind(digest?.id)
        .first<{ id: string }>()
    await expect.poll(deadLetterOf, { timeout: 30_000, interval: 100 }).toBeTruthy()
    const row = await deadLetterOf()
    const replay = await fetchWorker(`/v1/dead-letters/${row?.id}/replay`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    })
    expect(replay.status).toBe(200)
    await expect
      .poll(async () => (await digestsOf(owner.userId))[0]?.status, { timeout: 30_000, interval: 100 })
      .toBe('sent')
    const [raw, ...again] = await sentOf(digest?.id as string)
    expect(again).toHaveLength(0)
    expect(parseMime(raw as string).headers.subject).toBe('2 новых отклика на ваши проекты')
  })
})

/** `count` digests of other recipients, collecting (not due) with two members each, in one D1 batch. */
async function digestBacklog(count: number, tag: string): Promise<void> {
  const now = new Date().toISOString()
  const later = new Date(Date.now() + 3_600_000).toISOString()
  const insert = (id: string, user: string, event: string, status: string, digestId: string | null) =>
    env.DB.prepare(
      `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
         status, scheduled_at, created_at, updated_at, is_digest, digest_id, model)
       VALUES (?1, ?3, ?3, 'http', 'ResponseCreated', 'email', 'normal', ?2, ?4, ?6, ?7, ?7, ?5, ?8, '{}')`,
    ).bind(id, user, event, status, digestId ? 0 : 1, status === 'collecting' ? later : now, now, digestId)
  const statements: D1PreparedStatement[] = []
  for (let index = 0; index < count; index += 1) {
    const user = `backlog-${tag}-${index}`
    const digest = `ntf_backlog_${tag}_${index}`
    statements.push(insert(digest, user, `digest:${digest}`, 'collecting', null))
    for (const member of [1, 2]) {
      statements.push(insert(`${digest}_${member}`, user, `${digest}-event-${member}`, 'digested', digest))
    }
  }
  await env.DB.batch(statements)
}

describe('a digest meets the rules of any notification', () => {
  it('an address suppressed, and a recipient who opted out, while a digest collected: the digest is not sent', async () => {
    const suppressedOwner = await digestOwner()
    const optedOutOwner = await digestOwner()
    await consume([response(suppressedOwner, 'А').message, response(suppressedOwner, 'Б').message])
    await consume([response(optedOutOwner, 'В').message, response(optedOutOwner, 'Г').message])
    const now = new Date().toISOString()
    await env.DB.batch([
      env.DB.prepare(
        `INSERT INTO suppressions (address, cause, reason, until, source, created_at, updated_at)
         VALUES (?1, 'hard-bounce', 'test', NULL, 'operator', ?2, ?2)`,
      ).bind(suppressedOwner.email, now),
      env.DB.prepare(
        "UPDATE preferences SET enabled = 0, updated_at = ?2 WHERE user_id = ?1 AND kind = 'ResponseCreated'",
      ).bind(optedOutOwner.userId, now),
    ])
    for (const [owner, status] of [
      [suppressedOwner, 'suppressed'],
      [optedOutOwner, 'opted-out'],
    ] as const) {
      const [digest] = await digestsOf(owner.userId)
      const closed = await dispatchOnce({
        notificationId: digest?.id as string,
        due: await windowPassed(digest?.id as string),
      })
      await dispatchOnce(closed.enqueued[0]?.body as { notificationId: string; due: string })
      expect((await digestsOf(owner.userId))[0]?.status).toBe(status)
      expect(await sentOf(digest?.id as string)).toHaveLength(0)
    }
  })

  it('a digest that closes inside its recipient’s quiet hours waits for their end, delayed, not dropped', async () => {
    const owner = await digestOwner()
    await consume([response(owner, 'А').message, response(owner, 'Б').message])
    const [digest] = await digestsOf(owner.userId)
    // Quiet hours around "now" in Moscow (the owner's zone, as the inline recipient has no contact),
    // for the digest's urgency.
    const quiet = quietAroundNow()
    const due = await windowPassed(digest?.id as string)
    const closed = await dispatchOnce({ notificationId: digest?.id as string, due }, quiet)
    const [next] = closed.enqueued
    expect(next?.body.notificationId).toBe(digest?.id)
    const wait = Date.parse(next?.body.due as string) - Date.now()
    expect(wait).toBeGreaterThan(60 * 60_000)
    expect(wait).toBeLessThanOrEqual(121 * 60_000)
    expect(next?.delaySeconds).toBeGreaterThan(3600)
    expect((await digestsOf(owner.userId))[0]).toMatchObject({ status: 'pending', scheduled_at: next?.body.due })
  })

  it('a digest whose close message was lost is closed by the cron past its grace, and sent once', async () => {
    const owner = await digestOwner()
    await consume([response(owner, 'А').message, response(owner, 'Б').message])
    const [digest] = await digestsOf(owner.userId)
    // Due ten minutes ago, its message never came: the cron's search finds it and enqueues it again.
    const longAgo = new Date(Date.now() - 10 * 60_000).toISOString()
    await env.DB.prepare('UPDATE notifications SET scheduled_at = ?2, enqueued_at = ?2 WHERE id = ?1')
      .bind(digest?.id, longAgo)
      .run()
    await runCron(new Date())
    await expect
      .poll(async () => (await digestsOf(owner.userId))[0]?.status, { timeout: 30_000, interval: 100 })
      .toBe('sent')
    expect(await sentOf(digest?.id as string)).toHaveLength(1)
  })
})

describe('what the digest statements read', () => {
  it('joining, fencing, reading members and the search for lost closes read their own rows, not the backlog', async () => {
    const tag = guid().slice(0, 8)
    await digestBacklog(200, tag)
    const owner = await digestOwner()
    const events = [response(owner, 'П'), response(owner, 'П')]
    await consume(events.map((event) => event.message))
    const [digest] = await digestsOf(owner.userId)
    const id = digest?.id as string
    // A third member joins: both statements find the open digest by the partial unique index, the member by key.
    const member = {
      ...(await env.DB.prepare('SELECT * FROM notifications WHERE digest_id = ?1 LIMIT 1').bind(id).first()),
    }
    const third: DigestMember = {
      id: `ntf_third_${tag}`,
      idempotencyKey: `third:${tag}`,
      eventId: `third-${tag}`,
      source: 'http',
      kind: 'ResponseCreated',
      channel: 'email',
      urgency: 'normal',
      recipientUserId: owner.userId,
      recipientEmail: owner.email,
      recipientHash: null,
      recipientName: null,
      locale: 'ru',
      timeZone: 'Europe/Moscow',
      subject: null,
      textBody: null,
      htmlBody: null,
      templateVersion: null,
      status: 'digested',
      statusReason: null,
      errorCode: null,
      isFallback: false,
      decisionPerson: null,
      decisionRequest: null,
      decisionAt: null,
      scheduledAt: new Date().toISOString(),
      traceId: null,
      unsubscribeUrl: null,
      model: String(member.model),
      digest: { id: `ntf_unused_${tag}`, closesAt: new Date().toISOString() },
    }
    const [open, join] = await env.DB.batch([
      openDigest(env.DB, third, new Date().toISOString()),
      insertMember(env.DB, third, new Date().toISOString()),
    ])
    expect(open?.meta.changes).toBe(0)
    expect(join?.meta.changes).toBeGreaterThan(0)
    for (const result of [open, join]) expect(result?.meta.rows_read).toBeLessThan(50)
    // What an operator reads of it — the digest of a member's event, of a member, its events — by key too.
    const [ofEvent, ofMember, told] = await env.DB.batch([
      digestsTelling(env.DB, { eventId: third.eventId }),
      digestsTelling(env.DB, { notificationId: third.id }),
      eventsOfDigest(env.DB, id, 500),
    ])
    expect(ofEvent?.results).toMatchObject([{ id, size: 3 }])
    expect(ofMember?.results).toMatchObject([{ id, size: 3 }])
    expect(told?.results).toHaveLength(3)
    for (const result of [ofEvent, ofMember, told]) expect(result?.meta.rows_read).toBeLessThan(50)
    const due = await windowPassed(id)
    const ids = JSON.stringify([id])
    const now = new Date().toISOString()
    const [fence, closing, members] = await env.DB.batch([
      fenceDigests(env.DB, ids, now),
      closingDigests(env.DB, ids),
      digestMembers(env.DB, ids, 50),
    ])
    // The fence took it (its changes count the counting triggers' rows too), and the read after it sees it closing.
    expect(fence?.meta.changes).toBeGreaterThan(0)
    expect(closing?.results).toHaveLength(1)
    expect(((members?.results ?? []) as { position: number }[]).map((row) => row.position)).toEqual([1, 2, 3])
    // Each finds its rows by key: a few rows apiece beside 200 digests and 400 members.
    for (const result of [fence, closing, members]) expect(result?.meta.rows_read).toBeLessThan(50)

    const stuck = await selectStuckNotifications(
      env.DB,
      new Date(Date.now() + 600_000).toISOString(),
      new Date(Date.now() + 480_000).toISOString(),
      100,
    ).all<{ id: string }>()
    expect(stuck.results.map((row) => row.id)).toContain(id)
    expect(due <= now).toBe(true)
    // The fenced digest and the pending notifications other tests left: through the status index.
    expect(stuck.meta.rows_read).toBeLessThan(200)
  })
})

/** A recipient who chose ResponseCreated by email one by one (instant), under its throttle of 5 an hour. */
function instantOwner(): Promise<{ userId: string; email: string }> {
  return ownerWho('instant')
}

async function statusesOf(eventIds: readonly string[]): Promise<string[]> {
  const statuses: string[] = []
  for (const eventId of eventIds) statuses.push(...(await notificationsOf(eventId)).map((row) => row.status))
  return statuses
}

describe('throttling', () => {
  it('past five responses an hour, an instant owner’s next ones fold into one digest; none is lost, none sent twice', async () => {
    const owner = await instantOwner()
    const events = Array.from({ length: 8 }, (_, index) => response(owner, `Проект ${index}`))
    await consume(events.slice(0, 3).map((event) => event.message))
    await consume(events.slice(3).map((event) => event.message))
    const statuses = await statusesOf(events.map((event) => event.eventId))
    expect(statuses.filter((status) => status !== 'digested')).toHaveLength(5)
    expect(statuses.filter((status) => status === 'digested')).toHaveLength(3)
    const [digest, ...more] = await digestsOf(owner.userId)
    expect(more).toHaveLength(0)
    const members = await membersOf(digest?.id as string)
    expect(members.map((member) => member.event_id)).toEqual(events.slice(5).map((event) => event.eventId))
    // A folded notification keeps its model for the digest, not a rendering of its own.
    const folded = await env.DB.prepare('SELECT subject, model, status_reason FROM notifications WHERE id = ?1')
      .bind(members[0]?.id)
      .first<{ subject: string | null; model: string | null; status_reason: string }>()
    expect(folded?.subject).toBeNull()
    expect(JSON.parse(folded?.model as string).projectTitle).toBe('Проект 5')
    expect(folded?.status_reason).toContain('over the throttle of 5 per 60 min')

    // A redelivery of every event takes no place in the window and adds no member.
    await consume(
      events.map((event) => event.message),
      2,
    )
    expect(await membersOf(digest?.id as string)).toHaveLength(3)
    const window = await env.DB.prepare(
      "SELECT json_array_length(places) AS used FROM throttle_windows WHERE user_id = ?1 AND kind = 'ResponseCreated' AND channel = 'email'",
    )
      .bind(owner.userId)
      .first<{ used: number }>()
    expect(window?.used).toBe(5)

    const due = await windowPassed(digest?.id as string)
    await closeAndSend(digest?.id as string, due)
    const [raw] = await sentOf(digest?.id as string)
    expect(parseMime(raw as string).headers.subject).toBe('3 новых отклика на ваши проекты')
  })

  it('two batches racing for the last places of a window: exactly the throttle’s number go out at once', async () => {
    const owner = await instantOwner()
    const events = Array.from({ length: 8 }, (_, index) => response(owner, `Гонка ${index}`))
    await Promise.all([
      consume(events.slice(0, 4).map((event) => event.message)),
      consume(events.slice(4).map((event) => event.message)),
    ])
    const statuses = await statusesOf(events.map((event) => event.eventId))
    expect(statuses.filter((status) => status === 'digested')).toHaveLength(3)
    expect(statuses).toHaveLength(8)
  })

  it('a place that left the window frees it: the next response goes out at once', async () => {
    const owner = await instantOwner()
    const first = Array.from({ length: 6 }, (_, index) => response(owner, `Окно ${index}`))
    await consume(first.map((event) => event.message))
    expect((await statusesOf(first.map((event) => event.eventId))).filter((s) => s === 'digested')).toHaveLength(1)
    // The oldest of the five places taken 61 minutes ago: one place is free.
    await env.DB.prepare(`UPDATE throttle_windows SET places = json_set(places, '$[0]', ?2) WHERE user_id = ?1`)
      .bind(owner.userId, new Date(Date.now() - 61 * 60_000).toISOString())
      .run()
    const next = response(owner, 'Новое окно')
    await consume([next.message])
    const [row] = await notificationsOf(next.eventId)
    expect(row?.status).not.toBe('digested')
    expect(row?.status).not.toBe('throttled')
  })

  it('a kind without a digest ends throttled past its limit: recorded with what it would have said, counted, not sent', async () => {
    const userId = guid()
    const now = new Date().toISOString()
    const row = (index: number): ThrottledRow => ({
      id: `ntf_thr_${userId.slice(0, 8)}_${index}`,
      idempotencyKey: `thr:${userId}:${index}`,
      eventId: `thr-${userId}-${index}`,
      source: 'http',
      kind: 'InvitationCreated',
      channel: 'email',
      urgency: 'normal',
      recipientUserId: userId,
      recipientEmail: `thr-${userId.slice(0, 8)}@example.com`,
      recipientHash: null,
      recipientName: null,
      locale: 'ru',
      timeZone: 'Europe/Moscow',
      subject: `Приглашение ${index}`,
      textBody: 'Текст',
      htmlBody: '<p>Текст</p>',
      templateVersion: 0,
      status: 'pending',
      statusReason: null,
      errorCode: null,
      isFallback: false,
      decisionPerson: null,
      decisionRequest: null,
      decisionAt: null,
      scheduledAt: now,
      traceId: null,
      unsubscribeUrl: null,
      model: null,
      throttle: {
        max: 2,
        windowMinutes: 60,
        windowFloor: new Date(Date.now() - 3_600_000).toISOString(),
        model: '{}',
      },
    })
    const counted: number[] = []
    for (const index of [0, 1, 2]) {
      const planned = row(index)
      const results = await env.DB.batch([insertThrottled(env.DB, planned, now), takePlace(env.DB, planned, now)])
      counted.push(results[1]?.meta.changes ?? 0)
    }
    expect(counted).toEqual([1, 1, 0])
    const { results } = await env.DB.prepare(
      'SELECT status, subject, status_reason, digest_id FROM notifications WHERE recipient_user_id = ?1 ORDER BY id',
    )
      .bind(userId)
      .all<{ status: string; subject: string; status_reason: string | null; digest_id: string | null }>()
    expect(results.map((one) => one.status)).toEqual(['pending', 'pending', 'throttled'])
    expect(results[2]).toMatchObject({ subject: 'Приглашение 2', digest_id: null })
    expect(results[2]?.status_reason).toBe('over the throttle of 2 per 60 min')
    const metric = await env.DB.prepare(
      `SELECT value FROM counters WHERE name = 'notify_notifications_total'
       AND labels = '{"channel":"email","kind":"InvitationCreated","status":"throttled"}'`,
    ).first<{ value: number }>()
    expect(metric?.value).toBeGreaterThanOrEqual(1)
  })
})
