/**
 * The `in-app` channel end to end: an event of a kind with in-app templates,
 * once an operator turns the channel on, becomes an email and an item of the
 * recipient's feed — rendered from the kind's templates, at once whatever the
 * quiet hours, once however often the event comes. Through ingest, the real
 * local queues, D1 and the INBOX Durable Object.
 */
import { env, exports } from 'cloudflare:workers'
import { sign } from 'hono/jwt'
import { describe, expect, it } from 'vitest'
import { configOf } from '../src/config.ts'
import { CLOSE_ERASED } from '../src/inbox/inbox-feed.ts'
import { INBOX_AUDIENCE } from '../src/inbox/token.ts'
import { inAppParts } from '../src/templates/in-app.ts'
import { renderNotification } from '../src/templates/render-notification.ts'
import { templatesOf } from '../src/templates/template-store.ts'
import { ADMIN_TOKEN, eventually, freshInbound, inAppFor, notificationsOf, postIngest } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

type Response = { envelope: { eventId: string }; data: { recipient: { userId: string } } }

function tokenFor(userId: string): Promise<string> {
  return sign(
    { sub: userId, aud: INBOX_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 600 },
    env.INBOX_TOKEN_SECRET,
    'HS256',
  )
}

function feedOf(userId: string) {
  return env.INBOX.getByName(userId).page({ limit: 10, archived: true })
}

describe('the in-app channel', () => {
  it('turned on for a kind, makes one item of each event in its recipient’s feed beside the email, once', async () => {
    await inAppFor('ResponseCreated', true)
    try {
      const event = freshInbound('response.created')
      const { envelope, data } = JSON.parse(event.body) as Response
      expect((await postIngest({ events: [event] })).status).toBe(202)
      const item = await eventually(async () => {
        const { items } = await feedOf(data.recipient.userId)
        expect(items).toHaveLength(1)
        return items[0]
      })
      expect(item).toMatchObject({
        kind: 'ResponseCreated',
        title: 'Михаил Дизайнер откликнулся на «Редизайн лендинга для студии керамики»',
        body: 'Цена: 45\u00a0000\u00a0₽. Срок: 14 дней.',
        link: 'https://arthunt.ru/projects/.../responses',
        action: { label: 'Посмотреть отклик', url: 'https://arthunt.ru/projects/.../responses' },
      })
      const rows = await notificationsOf(envelope.eventId)
      expect(rows.map((row) => row.channel).sort()).toEqual(['email', 'in-app'])
      const inApp = rows.find((row) => row.channel === 'in-app')
      expect(inApp).toMatchObject({ id: item?.id, status: 'sent' })
      // The same event again: nothing new, in D1 or in the feed.
      expect((await postIngest({ events: [event] })).status).toBe(202)
      const again = freshInbound('response.created', (value) => {
        ;(value as unknown as Response).data.recipient.userId = data.recipient.userId
      })
      // A second response to the same owner is a second item (and shows the first one's was not lost).
      expect((await postIngest({ events: [again] })).status).toBe(202)
      await eventually(async () => expect((await feedOf(data.recipient.userId)).items).toHaveLength(2))
      expect(await notificationsOf(envelope.eventId)).toHaveLength(2)
      // ResponseCreated's email waits for its item to go unseen (its escalation: test/escalation.test.ts),
      // while the item is in the feed already.
      const second = await notificationsOf((JSON.parse(again.body) as Response).envelope.eventId)
      expect(second.find((row) => row.channel === 'email')?.status).toBe('escalating')
      expect(second.find((row) => row.channel === 'in-app')?.status).toBe('sent')
    } finally {
      await inAppFor('ResponseCreated', false)
    }
  })

  it('left off (as a deployment starts), sends the email alone', async () => {
    const event = freshInbound('response.created')
    const { envelope, data } = JSON.parse(event.body) as Response
    expect((await postIngest({ events: [event] })).status).toBe(202)
    await eventually(async () => expect(await notificationsOf(envelope.eventId)).toHaveLength(1))
    expect((await notificationsOf(envelope.eventId))[0]?.channel).toBe('email')
    expect((await feedOf(data.recipient.userId)).items).toEqual([])
  })

  it('is not held by quiet hours, which hold the email of the same urgency', async () => {
    // Quiet hours around the present hour in Moscow, whatever the time the test runs.
    const hour = Number(
      new Intl.DateTimeFormat('en-GB', { hour: '2-digit', hour12: false, timeZone: 'Europe/Moscow' }).format(
        new Date(),
      ),
    )
    const at = (h: number) => `${String((h + 24) % 24).padStart(2, '0')}:00`
    const config = configOf({
      ...env,
      QUIET_HOURS_URGENCIES: 'normal',
      QUIET_HOURS_START: at(hour - 1),
      QUIET_HOURS_END: at(hour + 2),
    } as Env)
    const now = new Date()
    const templates = templatesOf(undefined, ['ResponseCreated'])
    const subject = {
      kind: 'ResponseCreated',
      urgency: 'normal' as const,
      model: { actorName: 'Михаил', projectTitle: 'Логотип', deepLink: 'https://arthunt.example/r/1' },
    }
    const recipient = { userId: 'u-quiet', name: 'Анна', locale: 'ru', timeZone: 'Europe/Moscow' }
    const render = (channel: string) =>
      renderNotification(subject, recipient, { channel, isFallback: false }, templates, config, now)
    const email = await render('email')
    const inApp = await render('in-app')
    expect('error' in email || 'error' in inApp).toBe(false)
    expect((inApp as { scheduledAt: string }).scheduledAt).toBe(now.toISOString())
    expect((email as { scheduledAt: string }).scheduledAt > now.toISOString()).toBe(true)
  })

  it("keeps a producer's line break in the link from moving what follows into the action", async () => {
    const templates = templatesOf(undefined, ['ResponseCreated'])
    const subject = {
      kind: 'ResponseCreated',
      urgency: 'normal' as const,
      // The third part is three lines (link, action label, action address): a value that breaks a line would,
      // written as it is, make its own text the action's label and its own address the action's.
      model: {
        actorName: 'Михаил',
        projectTitle: 'Логотип',
        deepLink: 'https://arthunt.example/r/1\nЗабрать приз\nhttps://evil.example/',
      },
    }
    const recipient = { userId: 'u-lines', name: 'Анна', locale: 'ru', timeZone: 'Europe/Moscow' }
    const rendered = await renderNotification(
      subject,
      recipient,
      { channel: 'in-app', isFallback: false },
      templates,
      configOf(env),
      new Date(),
    )
    expect('error' in rendered).toBe(false)
    const extras = JSON.parse((rendered as { htmlBody: string }).htmlBody) as {
      link: string | null
      action: { label: string; url: string } | null
    }
    expect(extras.action?.label).toBe('Посмотреть отклик')
    expect(extras.action?.url).not.toBe('https://evil.example/')
    expect(extras.link).not.toBe('https://evil.example/')
    expect(JSON.stringify(extras)).not.toMatch(/"label":"Забрать приз"/)
  })

  it('is emptied by an erasure of its recipient, which closes their sockets and renames the feed', async () => {
    await inAppFor('ResponseCreated', true)
    try {
      const event = freshInbound('response.created')
      const { data } = JSON.parse(event.body) as Response
      const userId = data.recipient.userId
      expect((await postIngest({ events: [event] })).status).toBe(202)
      await eventually(async () => expect((await feedOf(userId)).items).toHaveLength(1))
      const before = await feedOf(userId)
      const socket = await exports.default.fetch('http://worker/v1/inbox/socket', {
        headers: { upgrade: 'websocket', authorization: `Bearer ${await tokenFor(userId)}` },
      })
      const ws = socket.webSocket as WebSocket
      const closed = new Promise<number>((resolve) => ws.addEventListener('close', (event) => resolve(event.code)))
      ws.accept()
      // By address: the person is found through their notifications, and so is their feed.
      const erased = await fetchWorker('/v1/erasures', {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ address: 'anna.client@example.com' }),
      })
      expect(erased.status).toBe(200)
      expect(await closed).toBe(CLOSE_ERASED)
      const after = await feedOf(userId)
      expect(after).toMatchObject({ items: [], counts: { unseen: 0, unread: 0 }, version: 0 })
      expect(after.feed).not.toBe(before.feed)
    } finally {
      await inAppFor('ResponseCreated', false)
    }
  })

  it('makes every rendered item one a feed takes, never failing the event: cuts what is long, leaves out a bad address', () => {
    const rendered = (html: string, subject = 'A title', text = 'a body') => ({ subject, text, html })
    expect(inAppParts(rendered('https://example.com/a\nOpen\nhttps://example.com/b'))).toEqual({
      subject: 'A title',
      textBody: 'a body',
      htmlBody: JSON.stringify({
        link: 'https://example.com/a',
        action: { label: 'Open', url: 'https://example.com/b' },
      }),
    })
    expect(inAppParts(rendered('\n\n')).htmlBody).toBe(JSON.stringify({ link: null, action: null }))
    expect(inAppParts(rendered('javascript:alert(1)\nOpen\nftp://example.com')).htmlBody).toBe(
      JSON.stringify({ link: null, action: null }),
    )
    expect(inAppParts(rendered('https://example.com\nOpen\n')).htmlBody).toBe(
      JSON.stringify({ link: 'https://example.com', action: null }),
    )
    const long = inAppParts(rendered('', 'x'.repeat(250), 'y'.repeat(2500)))
    expect(long.subject).toBe(`${'x'.repeat(199)}…`)
    expect(long.textBody).toBe(`${'y'.repeat(1999)}…`)
    expect(inAppParts(rendered(`https://example.com/${'z'.repeat(2100)}`)).htmlBody).toBe(
      JSON.stringify({ link: null, action: null }),
    )
  })
})
