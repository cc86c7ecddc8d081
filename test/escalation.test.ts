/**
 * Escalation (ResponseCreated's: in-app at once, the email 30 minutes later
 * unless the item was seen): exactly one outcome per email — seen before the
 * end of the wait, no email; not seen, one email; seen while the email is on
 * its way, still one email, and the story says which came first — with the
 * recipient's preferences, digest and throttle applied to the email as to any
 * other. Through the real notify-events and notify-dispatch consumers, D1 and
 * the INBOX Durable Object; the end of a wait is the row's time moved into
 * the past and its message delivered, as the queue would at that time.
 */
import { env } from 'cloudflare:workers'
import { sign } from 'hono/jwt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { INBOX_AUDIENCE } from '../src/inbox/token.ts'
import { consume, digestsOf, membersOf, ownerWho, response, windowPassed } from './digests.ts'
import { adminCall, dispatchOnce, eventually, guid, inAppFor, runCron } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

type Owner = { userId: string; email: string }

type Row = {
  id: string
  status: string
  status_reason: string | null
  escalation_of: string | null
  escalation_unless: string | null
  escalated_at: string | null
  digest_id: string | null
  throttled: number
  scheduled_at: string
}

type StoryEscalation = {
  inApp: string
  unless: string
  decidedAt: string | null
  markedAt: string | null
  first: 'mark' | 'email' | null
}

async function rowsOf(eventId: string): Promise<{ email: Row; inApp: Row }> {
  const { results } = await env.DB.prepare('SELECT * FROM notifications WHERE event_id = ?1')
    .bind(eventId)
    .all<Row & { channel: string }>()
  return {
    email: results.find((row) => row.channel === 'email') as Row,
    inApp: results.find((row) => row.channel === 'in-app') as Row,
  }
}

async function sentCount(id: string): Promise<number> {
  const row = await env.DB.prepare('SELECT count(*) AS n FROM sent_messages WHERE notification_id = ?1')
    .bind(id)
    .first<{ n: number }>()
  return row?.n ?? 0
}

/** A response to `owner`, its email waiting and its item in the feed. */
async function escalating(owner: Owner): Promise<{ eventId: string; email: Row; inApp: Row }> {
  const { message, eventId } = response(owner, `Проект ${guid().slice(0, 6)}`)
  await consume([message])
  const { email, inApp } = await rowsOf(eventId)
  expect(email).toMatchObject({ status: 'escalating', escalation_of: inApp.id, escalation_unless: 'seen' })
  expect(Date.parse(email.scheduled_at) - Date.now()).toBeGreaterThan(25 * 60_000)
  await eventually(async () =>
    expect((await env.INBOX.getByName(owner.userId).marksOf([inApp.id])).map((item) => item.id)).toEqual([inApp.id]),
  )
  return { eventId, email, inApp }
}

/** The end of an email's wait: its time moved to now (a mark before it spares the email), and its message delivered. */
async function waitEnds(email: Row, overrides: Record<string, unknown> = {}) {
  await env.DB.prepare("UPDATE notifications SET scheduled_at = ?2 WHERE id = ?1 AND status = 'escalating'")
    .bind(email.id, new Date().toISOString())
    .run()
  return dispatchOnce({ notificationId: email.id }, overrides)
}

/** Marks the item seen as the recipient's page does: through the inbox route, with their token. */
async function see(userId: string, id: string): Promise<void> {
  const token = await sign(
    { sub: userId, aud: INBOX_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 600 },
    env.INBOX_TOKEN_SECRET,
    'HS256',
  )
  const answer = await fetchWorker('/v1/inbox/seen', {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ids: [id] }),
  })
  expect(answer.status).toBe(200)
}

async function storyOf(eventId: string): Promise<StoryEscalation | null> {
  const story = await adminCall<{ notifications: { channel: string; escalation: StoryEscalation | null }[] }>(
    'GET',
    `/v1/events/${eventId}`,
  )
  expect(story.status).toBe(200)
  return story.body.notifications.find((row) => row.channel === 'email')?.escalation ?? null
}

describe('escalation: the email only if the in-app item went unseen', () => {
  beforeAll(() => inAppFor('ResponseCreated', true))
  afterAll(() => inAppFor('ResponseCreated', false))

  it('not seen by the end of the wait: exactly one email, counted by the throttle, the story saying the email came first', async () => {
    const owner = await ownerWho('instant')
    const { eventId, email, inApp } = await escalating(owner)
    const decided = await waitEnds(email)
    expect(decided.explicitAcks).toHaveLength(1)
    const after = (await rowsOf(eventId)).email
    // Written again as planning writes it now: pending, rendered, and in the owner's throttle window.
    expect(after).toMatchObject({ status: 'pending', escalation_of: inApp.id, throttled: 1 })
    expect(after.escalated_at).not.toBeNull()
    expect(decided.enqueued.map((message) => message.body.notificationId)).toEqual([email.id])
    await eventually(async () => expect((await rowsOf(eventId)).email.status).toBe('sent'))
    // The same message again (a redelivery): the decision is taken, nothing more is written or sent.
    const again = await waitEnds(email)
    expect(again.enqueued).toEqual([])
    expect(await sentCount(email.id)).toBe(1)
    expect(await storyOf(eventId)).toEqual({
      inApp: inApp.id,
      unless: 'seen',
      decidedAt: after.escalated_at,
      markedAt: null,
      first: 'email',
    })
  })

  it('seen before the end of the wait: no email, and the story says the mark came first', async () => {
    const owner = await ownerWho('instant')
    const { eventId, email, inApp } = await escalating(owner)
    await see(owner.userId, inApp.id)
    const decided = await waitEnds(email)
    expect(decided.enqueued).toEqual([])
    const after = (await rowsOf(eventId)).email
    expect(after.status).toBe('seen-in-app')
    expect(after.status_reason).toMatch(/^its in-app item was seen at \d{4}-/)
    expect(await sentCount(email.id)).toBe(0)
    const story = await storyOf(eventId)
    expect(story).toMatchObject({ inApp: inApp.id, first: 'mark', decidedAt: after.escalated_at })
    expect((story?.markedAt ?? '') < (story?.decidedAt ?? '')).toBe(true)
  })

  it('seen after the feed decided, while the email is on its way: still one email, the story saying it came first', async () => {
    const owner = await ownerWho('instant')
    const { eventId, email, inApp } = await escalating(owner)
    await waitEnds(email)
    // The recipient looks now, before the email is sent (its message is on the real queue).
    await see(owner.userId, inApp.id)
    const feed = env.INBOX.getByName(owner.userId)
    // Asked again, the feed answers what it decided: the mark after it takes nothing back.
    const at = new Date().toISOString()
    expect(await feed.escalate(inApp.id, 'seen', at, at)).toMatchObject({ email: true })
    await eventually(async () => expect((await rowsOf(eventId)).email.status).toBe('sent'))
    expect(await sentCount(email.id)).toBe(1)
    const story = await storyOf(eventId)
    expect(story?.first).toBe('email')
    expect((story?.markedAt ?? '') > (story?.decidedAt ?? '')).toBe(true)
  })

  it('decides by the end of the wait: a mark after it, before a late wake-up, spares nothing', async () => {
    const owner = await ownerWho('instant')
    const { eventId, email, inApp } = await escalating(owner)
    // The wait ended a minute ago; its message was late (a retry, the cron's grace), and the owner looked meanwhile.
    await env.DB.prepare("UPDATE notifications SET scheduled_at = ?2 WHERE id = ?1 AND status = 'escalating'")
      .bind(email.id, new Date(Date.now() - 60_000).toISOString())
      .run()
    await see(owner.userId, inApp.id)
    await dispatchOnce({ notificationId: email.id })
    await eventually(async () => expect((await rowsOf(eventId)).email.status).toBe('sent'))
    const story = await storyOf(eventId)
    expect(story?.first).toBe('email')
    expect(story?.markedAt).not.toBeNull()
  })

  it('one outcome whichever of the mark and the end of the wait comes first, each time', async () => {
    const owners = await Promise.all(Array.from({ length: 6 }, () => ownerWho('instant')))
    const waiting = await Promise.all(owners.map((owner) => escalating(owner)))
    // The mark and the decision race, per owner; then the message comes twice more.
    await Promise.all(
      waiting.map(async ({ email, inApp }, index) => {
        await Promise.all([see((owners[index] as Owner).userId, inApp.id), waitEnds(email)])
        await Promise.all([waitEnds(email), waitEnds(email)])
      }),
    )
    for (const [index, { eventId, email, inApp }] of waiting.entries()) {
      const at = new Date().toISOString()
      const decision = await env.INBOX.getByName((owners[index] as Owner).userId).escalate(inApp.id, 'seen', at, at)
      if (decision.email) {
        await eventually(async () => expect((await rowsOf(eventId)).email.status).toBe('sent'))
        expect(await sentCount(email.id)).toBe(1)
        expect((await storyOf(eventId))?.first).toBe('email')
      } else {
        expect((await rowsOf(eventId)).email.status).toBe('seen-in-app')
        expect(await sentCount(email.id)).toBe(0)
        expect((await storyOf(eventId))?.first).toBe('mark')
      }
    }
  })

  it('an email that escalates joins the owner’s digest, which tells it once', async () => {
    const owner = await ownerWho('digest')
    const { eventId, email } = await escalating(owner)
    await waitEnds(email, { DIGEST_WINDOW_SECONDS: '600' })
    const after = (await rowsOf(eventId)).email
    expect(after.status).toBe('digested')
    const [digest] = await digestsOf(owner.userId)
    expect(digest?.id).toBe(after.digest_id)
    expect((await membersOf(after.digest_id as string)).map((member) => member.id)).toEqual([email.id])
    const due = await windowPassed(after.digest_id as string)
    // A digest of one goes out as its only notification, rendered as it would have gone alone.
    const closed = await dispatchOnce({ notificationId: after.digest_id as string, due })
    expect(closed.enqueued.map((message) => message.body.notificationId)).toEqual([email.id])
    await dispatchOnce(closed.enqueued[0]?.body as { notificationId: string })
    expect((await rowsOf(eventId)).email.status).toBe('sent')
    expect(await sentCount(email.id)).toBe(1)
  })

  it('a recipient who turned either channel off gets the other alone, the email at once', async () => {
    const noInbox = await ownerWho('instant')
    const noEmail = await ownerWho('instant')
    const now = new Date().toISOString()
    await env.DB.prepare(
      `INSERT INTO preferences (user_id, kind, channel, enabled, source, updated_at) VALUES
       (?1, 'ResponseCreated', 'in-app', 0, 'api', ?3), (?2, 'ResponseCreated', 'email', 0, 'api', ?3)
       ON CONFLICT (user_id, kind, channel) DO UPDATE SET enabled = 0`,
    )
      .bind(noInbox.userId, noEmail.userId, now)
      .run()
    const first = response(noInbox, 'Без ленты')
    const second = response(noEmail, 'Без почты')
    await consume([first.message, second.message])
    const [one, two] = await Promise.all([rowsOf(first.eventId), rowsOf(second.eventId)])
    expect(one.inApp.status).toBe('opted-out')
    expect(one.email).toMatchObject({ status: 'pending', escalation_of: null })
    expect(two.email).toMatchObject({ status: 'opted-out', escalation_of: null })
    await eventually(async () => expect((await rowsOf(second.eventId)).inApp.status).toBe('sent'))
  })

  it('a kind that waits for its item to be read: seen is not enough, read is', async () => {
    const userId = `read-${guid()}`
    const feed = env.INBOX.getByName(userId)
    const item = (id: string) => ({
      notificationId: id,
      kind: 'ResponseCreated',
      title: 'Отклик',
      body: '',
      link: null,
      action: null,
      createdAt: new Date().toISOString(),
    })
    await feed.add(item('ntf_seen_only'))
    await feed.add(item('ntf_read'))
    const at = new Date().toISOString()
    await feed.mark('seen', { ids: ['ntf_seen_only'] }, at)
    await feed.mark('read', { ids: ['ntf_read'] }, at)
    const later = new Date(Date.parse(at) + 1000).toISOString()
    expect(await feed.escalate('ntf_seen_only', 'read', later, later)).toMatchObject({ email: true, readAt: null })
    expect(await feed.escalate('ntf_read', 'read', later, later)).toMatchObject({ email: false, readAt: at })
    // And a mark by the end of the wait, not after it: the decision is kept whatever is asked later.
    expect(await feed.escalate('ntf_seen_only', 'seen', later, later)).toMatchObject({ email: true })
  })

  it("waits the kind's own time unless ESCALATION_AFTER_SECONDS replaces it", async () => {
    const { notificationFor } = await import('../src/materialize/plan-event.ts')
    const { configOf } = await import('../src/config.ts')
    const now = new Date()
    const plan = (seconds: number | undefined) =>
      notificationFor(
        { source: 'http', event: { eventId: guid(), idempotencyKey: `test:${guid()}` } },
        { kind: 'ResponseCreated', urgency: 'normal', model: {} },
        { userId: guid(), inline: { email: 'owner@example.com', displayName: 'Анна' } },
        'email',
        { optedOut: new Set(), contacts: new Map() } as never,
        { ...configOf(env), ESCALATION_AFTER_SECONDS: seconds },
        now,
        { of: 'ntf_in_app', unless: 'seen' },
      )
    const wait = async (seconds: number | undefined) =>
      Date.parse(((await plan(seconds)) as { scheduledAt: string }).scheduledAt) - now.getTime()
    expect(await wait(undefined)).toBe(30 * 60_000)
    expect(await wait(20)).toBe(20_000)
  })

  it('a wait whose message was lost ends by the cron', async () => {
    const owner = await ownerWho('instant')
    const { eventId, email } = await escalating(owner)
    const past = new Date(Date.now() - 3_600_000).toISOString()
    await env.DB.prepare('UPDATE notifications SET scheduled_at = ?2, enqueued_at = ?2 WHERE id = ?1')
      .bind(email.id, past)
      .run()
    await runCron(new Date())
    await eventually(async () => expect((await rowsOf(eventId)).email.status).toBe('sent'))
    expect(await sentCount(email.id)).toBe(1)
  })
})
