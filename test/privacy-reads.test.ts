/**
 * Reading personal data: every role — viewer and admin, through the API and
 * the console — sees a notification's recipient masked and none of its
 * content until it asks to reveal it, and every unmasked read (the API's
 * `?reveal=true`, `?reveal=html` and `?raw=true`, the console's reveal, its
 * email frame and its raw download) leaves one audit row that names the
 * operator and the notification and never the address. And nothing a viewer
 * can read is a capability to write: no unsubscribe link survives in what a
 * viewer is shown, so nothing it reads opts a recipient out.
 */
import { createExecutionContext, createMessageBatch } from 'cloudflare:test'
import { env, exports } from 'cloudflare:workers'
import { beforeAll, describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import { signUnsubscribe, verifyUnsubscribe } from '../src/preferences/token.ts'
import {
  ADMIN_TOKEN,
  eventually,
  freshInbound,
  guid,
  notificationsOf,
  parseMime,
  postIngest,
  seedContact,
} from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const VIEWER_TOKEN = 'test-viewer-token-0123456789'
const KEY = 'test-unsubscribe-signing-key-0123456789'
const WITH_VIEWER = { VIEWER_TOKEN }
/** The shape of a signed unsubscribe token (src/preferences/token.ts), as the log scan looks for it. */
const TOKEN = /v1\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{43}/

type Role = 'viewer' | 'admin'
const tokenOf = (role: Role) => (role === 'admin' ? ADMIN_TOKEN : VIEWER_TOKEN)

type NotificationBody = {
  id: string
  recipientEmail: string | null
  recipientName: string | null
  subject: string | null
  text: string | null
  html: string | null
  unsubscribeUrl: string | null
  revealed: string[]
  timeline: { detail: Record<string, unknown> }[]
  sentMessage: { raw?: string } | null
}

async function api<T = Record<string, unknown>>(role: Role, path: string) {
  const response = await fetchWorker(path, { headers: { authorization: `Bearer ${tokenOf(role)}` } }, WITH_VIEWER)
  return { status: response.status, body: (await response.json()) as T }
}

type AuditRow = { id: number; actor: string; role: string; via: string; action: string; target: string | null }

/** The audit rows about one notification, oldest first, as stored (every column). */
async function auditOf(target: string): Promise<(AuditRow & Record<string, unknown>)[]> {
  const { results } = await env.DB.prepare('SELECT * FROM audit_log WHERE target = ?1 ORDER BY id')
    .bind(target)
    .all<AuditRow & Record<string, unknown>>()
  return results
}

/** The rows `read` added to the audit trail of `target`. */
async function auditedBy(target: string, read: () => Promise<unknown>) {
  const before = (await auditOf(target)).length
  await read()
  return (await auditOf(target)).slice(before)
}

/** A request to the Worker as a browser would send it to the console (with the viewer token configured). */
async function browse(path: string, init: RequestInit = {}) {
  const response = await worker.fetch(
    new Request(`http://worker${path}`, { redirect: 'manual', ...init }),
    { ...env, ...WITH_VIEWER } as Env,
    createExecutionContext(),
  )
  return { status: response.status, headers: response.headers, text: await response.text() }
}

/** A console session of `role`: its cookie, and the CSRF token of its forms. */
async function consoleSession(role: Role) {
  const signedIn = await browse('/console/sign-in', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
    body: new URLSearchParams({ token: tokenOf(role) }).toString(),
  })
  const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
  const overview = await browse('/console', { headers: { cookie } })
  const csrf = /name="_csrf" value="([^"]+)"/.exec(overview.text)?.[1] ?? ''
  expect(csrf).not.toBe('')
  const get = (path: string) => browse(path, { headers: { cookie } })
  const post = (path: string, form: Record<string, string> = {}) =>
    browse(path, {
      method: 'POST',
      headers: { cookie, origin: 'http://worker', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf, ...form }).toString(),
    })
  return { get, post }
}

// One sent invitation (an optional kind) to a known person, whose template places the one-click
// link in both parts, with a provider event whose SMTP answer quotes the address.
const userId = guid()
const address = `privacy-reader-${guid().slice(0, 8)}@example.com`
const localPart = address.slice(0, address.indexOf('@'))
const NAME = 'Михаил Дизайнер'
let eventId = ''
let id = ''

beforeAll(async () => {
  await seedContact(userId, { email: address, locale: 'de-DE', displayName: NAME })
  const template = await fetchWorker('/v1/templates/InvitationCreated/de/email', {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      subject: 'Einladung für {{ recipientName }}',
      textBody: 'Hallo {{ recipientName }}. Abmelden: {{ unsubscribeUrl }}',
      htmlBody: '<p>Hallo {{ recipientName }}</p><p><a href="{{ unsubscribeUrl }}">Abmelden</a></p>',
    }),
  })
  expect(template.status).toBe(200)
  const event = freshInbound('invitation.created', (value) => {
    const recipient = (value.data as { recipient: Record<string, unknown> }).recipient
    recipient.email = address
    recipient.userId = userId
    recipient.displayName = NAME
  })
  eventId = JSON.parse(event.body).envelope.eventId
  expect((await postIngest({ events: [event] })).status).toBe(202)
  const row = await eventually(async () => {
    const [found] = await notificationsOf(eventId)
    expect(found?.status).toBe('sent')
    return found as NonNullable<typeof found>
  })
  id = row.id
  const now = new Date().toISOString()
  await env.DB.prepare(
    `INSERT INTO delivery_events (provider, provider_event_id, provider_message_id, notification_id, type, status,
       occurred_at, received_at, detail) VALUES ('cloudflare', ?1, ?2, ?3, 'cf.email.sending.message.deferred',
       'deferred', ?4, ?4, ?5)`,
  )
    .bind(guid(), `provider-${guid()}`, id, now, JSON.stringify({ smtpResponse: `452 4.2.2 <${address}>: over quota` }))
    .run()
})

/** What must never be in a masked read, an audit row or a viewer's page: the address, its local part, the name. */
function expectNoPersonalData(text: string) {
  expect(text).not.toContain(address)
  expect(text).not.toContain(localPart)
  expect(text).not.toContain('Дизайнер')
}

describe('GET /v1/notifications/:id by default', () => {
  for (const role of ['viewer', 'admin'] as const) {
    it(`for ${role === 'viewer' ? 'a viewer' : 'an admin'}: the address and name masked, no content, no unsubscribe token, no audit row`, async () => {
      const rows = await auditedBy(id, async () => {
        const { status, body } = await api<NotificationBody>(role, `/v1/notifications/${id}`)
        expect(status).toBe(200)
        expect(body.recipientEmail).toMatch(/^p\*\*\*@example\.com$/)
        expect(body.recipientName).not.toBeNull()
        expect(body).toMatchObject({ subject: null, text: null, html: null, revealed: [] })
        expect(body.sentMessage).not.toBeNull()
        expect(body.sentMessage?.raw).toBeUndefined()
        expect(body.unsubscribeUrl).toMatch(/\/u\//)
        expect(body.timeline).toHaveLength(1)
        expectNoPersonalData(JSON.stringify(body))
        expect(JSON.stringify(body)).not.toMatch(TOKEN)
      })
      expect(rows).toEqual([])
    })
  }
})

describe('an unmasked read writes exactly one audit row, for every role', () => {
  const reads: { query: string; action: string; shows: (body: NotificationBody) => void }[] = [
    {
      query: '?reveal=true',
      action: 'notification.reveal',
      shows: (body) => {
        expect(body).toMatchObject({ recipientEmail: address, recipientName: NAME, subject: `Einladung für ${NAME}` })
        expect(body.text).toContain('Abmelden:')
        expect(JSON.stringify(body.timeline)).toContain(address)
      },
    },
    {
      query: '?raw=true',
      action: 'notification.raw',
      shows: (body) => {
        expect(body.recipientEmail).toBe(address)
        expect(parseMime(body.sentMessage?.raw ?? '').headers.to).toContain(address)
      },
    },
    {
      query: '?reveal=html',
      action: 'notification.html',
      shows: (body) => {
        expect(body.html).toContain(`Hallo ${NAME}`)
        expect(body.recipientEmail).toMatch(/^p\*\*\*@example\.com$/)
        expect(body).toMatchObject({ subject: null, text: null })
      },
    },
  ]
  for (const role of ['viewer', 'admin'] as const) {
    for (const read of reads) {
      it(`${role}: GET /v1/notifications/:id${read.query}`, async () => {
        const rows = await auditedBy(id, async () => {
          const { status, body } = await api<NotificationBody>(role, `/v1/notifications/${id}${read.query}`)
          expect(status).toBe(200)
          read.shows(body)
        })
        expect(rows).toHaveLength(1)
        expect(rows[0]).toMatchObject({ actor: `${role} token`, role, via: 'api', action: read.action, target: id })
        expectNoPersonalData(JSON.stringify(rows[0]))
      })
    }
  }

  it('a notification that does not exist: 404 and no row', async () => {
    const missing = `missing-${guid()}`
    const rows = await auditedBy(missing, async () => {
      expect((await api('viewer', `/v1/notifications/${missing}?reveal=true`)).status).toBe(404)
    })
    expect(rows).toEqual([])
  })
})

describe('the console', () => {
  for (const role of ['viewer', 'admin'] as const) {
    it(`${role}: the notification page is masked and has no content; reveal, the email frame and the raw download each write one audit row`, async () => {
      const session = await consoleSession(role)
      const masked = await auditedBy(id, async () => {
        const page = await session.get(`/console/notifications/${id}`)
        expect(page.status).toBe(200)
        expect(page.text).toContain('p***@example.com')
        expectNoPersonalData(page.text)
        expect(page.text).not.toContain('Einladung')
        expect(page.text).not.toContain('Abmelden')
        expect(page.text).not.toContain('<iframe')
      })
      expect(masked).toEqual([])

      const revealed = await auditedBy(id, async () => {
        const page = await session.post(`/console/notifications/${id}/reveal`)
        expect(page.status).toBe(200)
        expect(page.text).toContain(address)
        expect(page.text).toContain(`Einladung für ${NAME}`)
        expect(page.text).toContain(`/console/notifications/${id}/frame`)
      })
      const framed = await auditedBy(id, async () => {
        const frame = await session.get(`/console/notifications/${id}/frame`)
        expect(frame.status).toBe(200)
        expect(frame.text).toContain(`Hallo ${NAME}`)
        // It loads and runs nothing, and only the console's own pages may frame it.
        expect(frame.headers.get('content-security-policy')).toBe(
          "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox; frame-ancestors 'self'",
        )
      })
      const downloaded = await auditedBy(id, async () => {
        const raw = await session.post(`/console/notifications/${id}/reveal`, { raw: '1' })
        expect(raw.status).toBe(200)
        expect(raw.headers.get('content-type')).toBe('message/rfc822')
        expect(parseMime(raw.text).headers.to).toContain(address)
      })
      for (const [rows, action] of [
        [revealed, 'notification.reveal'],
        [framed, 'notification.html'],
        [downloaded, 'notification.raw'],
      ] as const) {
        expect(rows, action).toHaveLength(1)
        expect(rows[0]).toMatchObject({ actor: `${role} token`, role, via: 'console', action, target: id })
        expectNoPersonalData(JSON.stringify(rows[0]))
      }
    })
  }
})

/** Every URL, path under `/u/` and long opaque string in `text`, in its raw and its decoded forms. */
function capabilitiesIn(text: string): string[] {
  const unescaped = text.replaceAll('&amp;', '&').replaceAll('\\/', '/')
  const forms = [text, unescaped]
  // A MIME message hides its parts in base64: read them as a mail client would.
  if (/^Content-Transfer-Encoding: base64/im.test(text)) {
    const mail = parseMime(text)
    forms.push(mail.text, mail.html, ...Object.values(mail.headers))
  }
  const found = new Set<string>()
  for (const form of forms) {
    for (const pattern of [/https?:\/\/[^\s"'<>\\]+/g, /\/u\/[^\s"'<>\\]+/g, /[A-Za-z0-9._~%-]{24,}/g]) {
      for (const [match] of form.matchAll(pattern)) found.add(match)
    }
  }
  return [...found]
}

const preferencesOf = async (user: string) =>
  (await env.DB.prepare('SELECT count(*) AS n FROM preferences WHERE user_id = ?1').bind(user).first<{ n: number }>())
    ?.n ?? 0

describe('nothing a viewer can read is a capability to write', () => {
  it('every URL or token in what a viewer reads of an optional notification, POSTed to the Worker, opts no one out', async () => {
    const link = (await env.DB.prepare('SELECT unsubscribe_url FROM notifications WHERE id = ?1')
      .bind(id)
      .first<{ unsubscribe_url: string }>()) as { unsubscribe_url: string }
    expect(
      await verifyUnsubscribe(link.unsubscribe_url.slice(link.unsubscribe_url.lastIndexOf('/') + 1), [KEY]),
    ).toEqual({ userId, kind: 'InvitationCreated', channel: 'email' })
    // Another recipient's token, short enough (a short user id) to fit whole in the 120 characters
    // of an error the console's overview shows straight from D1.
    const other = await signUnsubscribe({ userId: 'u-7', kind: 'ResponseCreated', channel: 'email' }, KEY)
    expect(other.length).toBeLessThan(110)
    const failure = (queue: string, error: string, message: unknown) => ({
      id: `dl-${guid()}`,
      timestamp: new Date(),
      attempts: 1,
      body: {
        notifyEdgeDeadLetter: 1,
        queue,
        code: 'NTF_INVALID_PAYLOAD',
        error,
        attempts: 1,
        failureId: guid(),
        failedAt: new Date().toISOString(),
        message,
      },
    })
    createExecutionContext()
    await worker.queue(
      createMessageBatch('notify-dlq', [
        // A provider event of a shape this Worker does not know, quoting the message's headers.
        failure('notify-email-events', `not a delivery event: headers: List-Unsubscribe: <${link.unsubscribe_url}>`, {
          type: 'cf.email.sending.message.sent',
          payload: { headers: { 'List-Unsubscribe': `<${link.unsubscribe_url}>` } },
        }),
        // A refusal that quotes a token first.
        failure('notify-dispatch', `${other} refused by the provider`, { notificationId: `ntf_${guid()}` }),
      ]),
      env,
    )
    const { results: letters } = await env.DB.prepare(
      "SELECT id FROM dead_letters WHERE queue IN ('notify-email-events', 'notify-dispatch')",
    ).all<{ id: string }>()
    expect(letters).toHaveLength(2)

    const session = await consoleSession('viewer')
    const reads: string[] = []
    for (const path of [
      `/v1/notifications/${id}`,
      `/v1/notifications/${id}?reveal=true`,
      `/v1/notifications/${id}?reveal=html`,
      `/v1/notifications/${id}?raw=true`,
      `/v1/events/${eventId}`,
      `/v1/preferences/${userId}`,
      `/v1/audit?target=${id}`,
      '/v1/dead-letters',
      ...letters.map((letter) => `/v1/dead-letters/${letter.id}`),
    ]) {
      const { status, body } = await api('viewer', path)
      expect(status, path).toBe(200)
      reads.push(JSON.stringify(body))
      const raw = (body as { sentMessage?: { raw?: string } }).sentMessage?.raw
      if (raw) reads.push(raw)
    }
    for (const path of [
      '/console',
      `/console/notifications/${id}`,
      `/console/notifications/${id}/frame`,
      `/console/events/${eventId}`,
      '/console/dead-letters',
      ...letters.map((letter) => `/console/dead-letters/${letter.id}`),
    ]) {
      const page = await session.get(path)
      expect(page.status, path).toBe(200)
      reads.push(page.text)
    }
    for (const form of [{}, { raw: '1' }] as Record<string, string>[]) {
      const page = await session.post(`/console/notifications/${id}/reveal`, form)
      expect(page.status).toBe(200)
      reads.push(page.text)
    }

    const candidates = [...new Set(reads.flatMap(capabilitiesIn))]
    // The places the link was are still there, masked: the test looks where a capability would be.
    expect(candidates.filter((candidate) => candidate.includes('/u/')).length).toBeGreaterThan(0)
    const before = await env.DB.prepare('SELECT count(*) AS n FROM preferences').first<{ n: number }>()
    const pieces: string[] = []
    for (const candidate of candidates) {
      const path = /^https?:/.test(candidate) ? pathOf(candidate) : candidate
      const target = path.startsWith('/') ? path : `/u/${candidate}`
      // As a mail provider's one-click POST (RFC 8058) would send it.
      const answer = await exports.default.fetch(`http://worker${target}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'List-Unsubscribe=One-Click',
      })
      await answer.arrayBuffer()
      pieces.push(candidate, ...path.split('/'))
    }
    // No write: not the recipient's preferences, nobody's.
    expect(await preferencesOf(userId)).toBe(0)
    expect(await env.DB.prepare('SELECT count(*) AS n FROM preferences').first<{ n: number }>()).toEqual(before)
    // And no capability held back for later: not one of them, whole or by path segment, is a valid token.
    for (const piece of pieces) expect(await verifyUnsubscribe(safeDecode(piece), [KEY]), piece).toBeUndefined()
  })

  it('an admin who reveals sees the real link, in the fields and the raw MIME (and the read is audited)', async () => {
    const masked = await api<NotificationBody>('admin', `/v1/notifications/${id}`)
    expect(masked.body.unsubscribeUrl).not.toMatch(TOKEN)
    const rows = await auditedBy(id, async () => {
      const { body } = await api<NotificationBody>('admin', `/v1/notifications/${id}?raw=true`)
      const token = (body.unsubscribeUrl ?? '').slice((body.unsubscribeUrl ?? '').lastIndexOf('/') + 1)
      expect(await verifyUnsubscribe(token, [KEY])).toEqual({ userId, kind: 'InvitationCreated', channel: 'email' })
      expect(body.text).toContain(token)
      expect(body.html).toContain(token)
      const mail = parseMime(body.sentMessage?.raw ?? '')
      expect(mail.headers['list-unsubscribe']).toContain(token)
      expect(mail.text).toContain(token)
    })
    expect(rows).toHaveLength(1)
    expect(JSON.stringify(rows[0])).not.toMatch(TOKEN)
    expect(await preferencesOf(userId)).toBe(0)
  })
})

function pathOf(url: string): string {
  try {
    return new URL(url).pathname
  } catch {
    return url
  }
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}
