import { env } from 'cloudflare:workers'
import { sign } from 'hono/jwt'
import { describe, expect, it } from 'vitest'
import { INBOX_AUDIENCE } from '../src/inbox/token.ts'
import {
  adminCall,
  consoleAnswer,
  consolePage,
  eventually,
  freshInbound,
  inAppFor,
  notificationsOf,
  postIngest,
} from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

type Issue = { field: string; message: string }
type Answer<T> = { status: number; body: T & { error?: { code: string; message: string; issues?: Issue[] } } }
type Item = { title: string; body: string; link: string | null; action: { label: string; url: string } | null }
type InAppTemplate = Item & { kind: string; locale: string; channel: string; version: number; createdAt: string }
type FeedMarks = { seenAt: string | null; readAt: string | null; archivedAt: string | null } | null
type Story = {
  notifications: { id: string; channel: string; status: string; recipientUserId: string; inFeed: FeedMarks }[]
}
type Response = { envelope: { eventId: string }; data: { recipient: { userId: string } } }

function admin<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<Answer<T>> {
  return adminCall(method, path, body) as Promise<Answer<T>>
}

/** An event of ResponseCreated through ingest, once its in-app notification is in its recipient's feed. */
async function deliveredInApp(): Promise<{ eventId: string; userId: string; id: string }> {
  const event = freshInbound('response.created')
  const { envelope, data } = JSON.parse(event.body) as Response
  expect((await postIngest({ events: [event] })).status).toBe(202)
  const id = await eventually(async () => {
    const row = (await notificationsOf(envelope.eventId)).find((notification) => notification.channel === 'in-app')
    expect(row?.status).toBe('sent')
    return row?.id as string
  })
  return { eventId: envelope.eventId, userId: data.recipient.userId, id }
}

async function storedVersions(kind: string, locale: string, channel: string): Promise<number> {
  const row = await env.DB.prepare(
    'SELECT count(*) AS n FROM templates WHERE kind = ?1 AND locale = ?2 AND channel = ?3',
  )
    .bind(kind, locale, channel)
    .first<{ n: number }>()
  return row?.n ?? 0
}

const EDITED = {
  title: 'Отклик от {{ actorName }}',
  body: 'Проект «{{ projectTitle }}»',
  link: '{{ deepLink }}?from=inbox',
  action: { label: 'Ответить', url: '{{ deepLink }}/reply' },
}
const EXAMPLE_LINK = 'https://arthunt.ru/projects/.../responses'

describe('in-app templates through the API', () => {
  it('GET answers the kind’s built-in in-app template in the words it is edited with', async () => {
    const answer = await admin<InAppTemplate>('GET', '/v1/templates/ResponseCreated/ru/in-app')
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({
      kind: 'ResponseCreated',
      locale: 'ru',
      channel: 'in-app',
      version: 0,
      createdAt: null,
      title: '{{ actorName }} откликнулся на «{{ projectTitle }}»',
      body: expect.stringContaining('{{ proposedPrice | money: proposedCurrency }}'),
      link: '{{ deepLink }}',
      action: { label: 'Посмотреть отклик', url: '{{ deepLink }}' },
    })
  })

  it('PUT saves a version (audited) that GET answers back, and the next item of the kind is made from it', async () => {
    const saved = await admin<InAppTemplate & { preview: Item }>(
      'PUT',
      '/v1/templates/ResponseCreated/ru/in-app',
      EDITED,
    )
    expect(saved.status).toBe(200)
    expect(saved.body).toMatchObject({
      ...EDITED,
      kind: 'ResponseCreated',
      locale: 'ru',
      channel: 'in-app',
      version: 1,
    })
    // The preview is the example's item as a feed would show it.
    expect(saved.body.preview).toEqual({
      title: 'Отклик от Михаил Дизайнер',
      body: 'Проект «Редизайн лендинга для студии керамики»',
      link: `${EXAMPLE_LINK}?from=inbox`,
      action: { label: 'Ответить', url: `${EXAMPLE_LINK}/reply` },
    })
    // Kept in the three parts every template has: the third is the lines of the link and the action.
    const row = await env.DB.prepare(
      "SELECT subject, text_body, html_body, active FROM templates WHERE kind = 'ResponseCreated' AND locale = 'ru' AND channel = 'in-app' AND version = 1",
    ).first()
    expect(row).toEqual({
      subject: EDITED.title,
      text_body: EDITED.body,
      html_body: `${EDITED.link}\n${EDITED.action.label}\n${EDITED.action.url}`,
      active: 1,
    })
    const audit = await env.DB.prepare(
      "SELECT action, target FROM audit_log WHERE action = 'template.save' AND target = 'ResponseCreated/ru/in-app'",
    ).all()
    expect(audit.results).toEqual([{ action: 'template.save', target: 'ResponseCreated/ru/in-app' }])
    const read = await admin<InAppTemplate>('GET', '/v1/templates/ResponseCreated/ru/in-app')
    const { preview, ...template } = saved.body
    expect(read.body).toEqual(template)
    // What GET answers can be sent back as it is: a version without its link and action is one too.
    const bare = await admin<InAppTemplate>('PUT', '/v1/templates/ResponseCreated/ru/in-app', {
      ...read.body,
      link: null,
      action: null,
    })
    expect(bare.body).toMatchObject({ version: 2, link: null, action: null })
    expect((await admin('PUT', '/v1/templates/ResponseCreated/ru/in-app', read.body)).body).toMatchObject({
      version: 3,
      ...EDITED,
    })

    await inAppFor('ResponseCreated', true)
    try {
      const { eventId, userId, id } = await deliveredInApp()
      const { items } = await env.INBOX.getByName(userId).page({ limit: 10, archived: true })
      expect(items).toHaveLength(1)
      expect(items[0]).toMatchObject({ id, ...preview })
      const row = (await notificationsOf(eventId)).find((notification) => notification.id === id)
      expect(row).toMatchObject({ subject: preview.title, text_body: preview.body, template_version: 3 })
    } finally {
      await inAppFor('ResponseCreated', false)
    }
  })

  it('preview answers the item as a feed would show it: cut where long, an address a feed would not take left out', async () => {
    const cut = await admin<Item>('POST', '/v1/templates/preview', {
      kind: 'ResponseCreated',
      channel: 'in-app',
      title: '{{ projectTitle }} {% for i in (1..30) %}слово {% endfor %}',
      body: '{{ actorName }}',
      link: 'ftp://example.com/{{ projectId }}',
      action: { label: 'Открыть', url: 'javascript:alert(1)' },
    })
    expect(cut.status).toBe(200)
    expect(cut.body.title).toHaveLength(200)
    expect(cut.body.title.endsWith('…')).toBe(true)
    expect(cut.body).toMatchObject({ body: 'Михаил Дизайнер', link: null, action: null })
    // Parts not given come from the template in effect (here the built-in default), with a model of one's own.
    const laid = await admin<Item>('POST', '/v1/templates/preview', {
      kind: 'ResponseCreated',
      locale: 'en',
      channel: 'in-app',
      title: 'Hi {{ actorName }}',
      model: { actorName: 'Ann', deepLink: 'https://example.com/r/1' },
    })
    expect(laid.body).toEqual({
      title: 'Hi Ann',
      body: '',
      link: 'https://example.com/r/1',
      action: { label: 'View the response', url: 'https://example.com/r/1' },
    })
  })

  it('refuses what does not parse or render, naming the field as it is edited: title, body, link, action.label, action.url', async () => {
    const emails = await storedVersions('ResponseCreated', 'en', 'email')
    const put = (body: unknown) => admin('PUT', '/v1/templates/ResponseCreated/en/in-app', body)
    const syntax = await put({
      title: '{% if actorName %}no end',
      body: '{{ projectTitle | no_such_filter }}',
      link: '{{ deepLink',
      action: { label: 'Open', url: '{% for %}' },
    })
    expect(syntax.status).toBe(400)
    expect(syntax.body.error?.issues?.map((issue) => issue.field)).toEqual(['title', 'body', 'link', 'action.url'])
    for (const issue of syntax.body.error?.issues ?? []) expect(issue.message).toMatch(/^Liquid syntax error: /)
    // A line of the third part that fails to render alone is named by its field, not as an HTML body.
    const render = await put({
      title: 't',
      body: 'b',
      link: '{{ deepLink }}',
      action: { label: '{{ 1 | money: "NOT-A-CURRENCY" }}', url: '{{ deepLink }}' },
    })
    expect(render.status).toBe(400)
    expect(render.body.error?.issues).toEqual([
      { field: 'action.label', message: expect.stringMatching(/^render error: .*currency/i) },
    ])
    const limit = await put({ title: '{{ projectTitle }}', body: `{% for i in (1..100000) %}x{% endfor %}` })
    expect(limit.status).toBe(400)
    expect(limit.body.error?.issues).toEqual([
      { field: 'body', message: expect.stringMatching(/^body (renders more|needs more|took longer)/) },
    ])
    // A line break would move the lines after it; an action needs both its label and its address.
    const shape = await put({ title: 't', body: 'b', link: 'https://a\nb', action: { label: 'Open' } })
    expect(shape.status).toBe(400)
    expect(shape.body.error?.issues?.map((issue) => issue.field).sort()).toEqual(['action.url', 'link'])
    // An email's parts on the in-app channel, and an item's on the email channel: the path's channel names the fields.
    const emailBody = await put({ subject: 's', textBody: 't', htmlBody: 'h' })
    expect(emailBody.body.error?.issues?.map((issue) => issue.field)).toEqual(['title', 'body'])
    const itemBody = await admin('PUT', '/v1/templates/ResponseCreated/en/email', { title: 't', body: 'b' })
    expect(itemBody.status).toBe(400)
    expect(itemBody.body.error?.issues?.map((issue) => issue.field)).toEqual(['subject', 'textBody', 'htmlBody'])
    const preview = await admin('POST', '/v1/templates/preview', {
      kind: 'ResponseCreated',
      channel: 'in-app',
      title: 'ok',
      body: 'ok',
      link: '{{ deepLink | nope }}',
    })
    expect(preview.status).toBe(400)
    expect(preview.body.error?.issues?.map((issue) => issue.field)).toEqual(['link'])
    expect(await storedVersions('ResponseCreated', 'en', 'in-app')).toBe(0)
    // The migrations' English email, untouched.
    expect(await storedVersions('ResponseCreated', 'en', 'email')).toBe(emails)
  })

  it('refuses the in-app channel of a kind without an in-app item: 400 naming the channel, 404 on GET, nothing saved', async () => {
    for (const kind of ['VerificationApproved', 'ResponseCreated.digest']) {
      const put = await admin('PUT', `/v1/templates/${kind}/ru/in-app`, { title: 't', body: 'b' })
      expect(put.status).toBe(400)
      expect(put.body.error?.code).toBe('INVALID_REQUEST')
      expect(put.body.error?.issues).toEqual([{ field: 'channel', message: expect.stringContaining('no in-app') }])
      // Even with a body that fits neither channel, the channel is what is refused.
      const garbled = await admin('PUT', `/v1/templates/${kind}/ru/in-app`, { title: 42 })
      expect(garbled.body.error?.issues?.map((issue) => issue.field)).toEqual(['channel'])
      const get = await admin('GET', `/v1/templates/${kind}/ru/in-app`)
      expect(get.status).toBe(404)
      expect(get.body.error?.message).toContain('no in-app templates')
      const preview = await admin('POST', '/v1/templates/preview', { kind, channel: 'in-app', title: 't', body: 'b' })
      expect(preview.status).toBe(400)
      expect(preview.body.error?.issues?.map((issue) => issue.field)).toEqual(['channel'])
      expect(await storedVersions(kind, 'ru', 'in-app')).toBe(0)
    }
  })
})

describe('an event’s story and its in-app item', () => {
  it('carries when the recipient saw, read and archived the item, read from their feed; none once the feed is erased', async () => {
    await inAppFor('ResponseCreated', true)
    try {
      const { eventId, userId, id } = await deliveredInApp()
      const story = async () => (await admin<Story>('GET', `/v1/events/${eventId}`)).body.notifications
      const before = await story()
      expect(before.find((n) => n.channel === 'in-app')?.inFeed).toEqual({
        seenAt: null,
        readAt: null,
        archivedAt: null,
      })
      expect(before.find((n) => n.channel === 'email')?.inFeed).toBeNull()
      const token = await sign(
        { sub: userId, aud: INBOX_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 600 },
        env.INBOX_TOKEN_SECRET,
        'HS256',
      )
      const read = await fetchWorker('/v1/inbox/read', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ids: [id] }),
      })
      expect(read.status).toBe(200)
      const marked = (await story()).find((n) => n.id === id)?.inFeed
      expect(marked?.readAt).toMatch(/^\d{4}-\d\d-\d\dT/)
      expect(marked).toEqual({ seenAt: marked?.readAt, readAt: marked?.readAt, archivedAt: null })

      // The console's story says so with its times.
      const page = await consolePage(`/console/events/${eventId}`)
      expect(page).toMatch(/seen <time datetime="[^"]+"[^>]*>[^<]+<\/time>, read <time/)

      await env.INBOX.getByName(userId).erase()
      expect((await story()).find((n) => n.id === id)?.inFeed).toBeNull()
      expect(await consolePage(`/console/events/${eventId}`)).toContain('no longer in the feed')
    } finally {
      await inAppFor('ResponseCreated', false)
    }
  })
})

describe('in-app templates in the console', () => {
  it('lists them beside the emails, edits them as Title, Body, Link, Action label and Action address, and previews the item', async () => {
    const list = await consolePage('/console/templates')
    expect(list).toContain('href="/console/templates/ResponseCreated/ru/in-app"')
    expect(list).not.toContain('href="/console/templates/VerificationApproved/ru/in-app"')
    const editor = await consolePage('/console/templates/ResponseCreated/en/in-app')
    for (const label of ['Title', 'Body', 'Link', 'Action label', 'Action address']) {
      expect(editor).toMatch(new RegExp(`<label>\\s*${label}\\s*<(input|textarea)`))
    }
    expect(editor).toContain('value="{{ deepLink }}"')
    const preview = await consolePage('/console/templates/ResponseCreated/en/in-app', {
      title: 'Hi {{ actorName }}',
      body: '',
      link: 'not an address',
      actionLabel: 'Open',
      actionUrl: '{{ deepLink }}',
    })
    expect(preview).toContain('<strong>Hi Михаил Дизайнер</strong>')
    expect(preview).toContain('none (empty, or not an http(s) address)')
    expect(preview).toContain(`Open: <code>${EXAMPLE_LINK}</code>`)
    // An action with its label alone: the API names the address it lacks.
    const half = await consolePage('/console/templates/ResponseCreated/en/in-app', {
      title: 't',
      body: '',
      link: '',
      actionLabel: 'Open',
      actionUrl: '',
    })
    expect(half).toContain('<code>action.url</code>')
    // No in-app editor for a kind without an in-app item.
    expect((await consoleAnswer('/console/templates/VerificationApproved/ru/in-app')).status).toBe(404)
  })
})
