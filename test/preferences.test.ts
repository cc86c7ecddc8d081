/**
 * What a recipient may turn off, and how: per-kind preferences, and the
 * one-click unsubscribe link (RFC 8058 / RFC 2369) every optional email
 * carries — signed, refused when forged, never changed by a GET.
 */
import { env, exports } from 'cloudflare:workers'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { signUnsubscribe } from '../src/preferences/token.ts'
import {
  ADMIN_TOKEN,
  deliver,
  eventually,
  freshInbound,
  guid,
  notificationsOf,
  parseMime,
  postIngest,
  seedContact,
  sentMessagesOf,
} from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const KEY = 'test-unsubscribe-signing-key-0123456789'

const admin = (path: string, init: RequestInit = {}) =>
  fetchWorker(path, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })

function responseTo(userId: string, email = `pref-${guid().slice(0, 8)}@example.com`) {
  return freshInbound('response.created', (value) => {
    const recipient = (value.data as { recipient: Record<string, unknown> }).recipient
    recipient.email = email
    recipient.userId = userId
  })
}

function invitationTo(userId: string, email = `pref-${guid().slice(0, 8)}@example.com`) {
  return freshInbound('invitation.created', (value) => {
    const recipient = (value.data as { recipient: Record<string, unknown> }).recipient
    recipient.email = email
    recipient.userId = userId
  })
}

const eventIdOf = (event: { body: string; headers: Record<string, string> }) =>
  event.headers['message-id'] ?? (JSON.parse(event.body).envelope.eventId as string)

async function ended(event: { body: string; headers: Record<string, string> }, status: string) {
  expect((await postIngest({ events: [event] })).status).toBe(202)
  return eventually(async () => {
    const rows = await notificationsOf(eventIdOf(event))
    expect(rows.map((row) => row.status)).toEqual([status])
    return rows[0] as NonNullable<(typeof rows)[0]>
  })
}

async function rawOf(event: { body: string; headers: Record<string, string> }) {
  const [message] = await sentMessagesOf(eventIdOf(event))
  return message?.raw as string
}

const preferenceRows = async () =>
  (await env.DB.prepare('SELECT count(*) AS n FROM preferences').first<{ n: number }>())?.n ?? 0

describe('one-click unsubscribe', () => {
  it('an optional email carries List-Unsubscribe (https) and List-Unsubscribe-Post; a transactional one neither', async () => {
    const userId = guid()
    const optional = responseTo(userId)
    await ended(optional, 'sent')
    const headers = parseMime(await rawOf(optional)).headers
    expect(headers['list-unsubscribe']).toMatch(
      /^<https:\/\/notify-edge\.example\.workers\.dev\/u\/v1\.[\w-]+\.[\w-]{43}>$/,
    )
    expect(headers['list-unsubscribe-post']).toBe('List-Unsubscribe=One-Click')

    const owner = guid()
    await seedContact(owner, { email: `owner-${owner.slice(0, 8)}@example.com` })
    const decision = freshInbound('verification-completed', (value) => {
      Object.assign(value, { UserId: owner, PersonId: guid(), RequestId: guid(), Decision: 'approved' })
    })
    await deliver(decision, 1)
    await eventually(async () => expect((await notificationsOf(eventIdOf(decision)))[0]?.status).toBe('pending'))
    const [row] = await notificationsOf(eventIdOf(decision))
    await deliver({ notificationId: row?.id }, 1, `msg-${guid()}`, 'notify-dispatch')
    const transactional = parseMime(await rawOf(decision)).headers
    expect(transactional['list-unsubscribe']).toBeUndefined()
    expect(transactional['list-unsubscribe-post']).toBeUndefined()
  })

  it('POST of the link opts out (idempotently); the next optional email of that kind is opted-out, another kind and a transactional one are sent', async () => {
    const userId = guid()
    const first = responseTo(userId)
    await ended(first, 'sent')
    const link = /<([^>]+)>/.exec(parseMime(await rawOf(first)).headers['list-unsubscribe'] as string)?.[1] as string
    const path = new URL(link).pathname

    const shown = await fetchWorker(path, { headers: { accept: 'text/html', 'accept-language': 'ru-RU,ru;q=0.9' } })
    expect(shown.status).toBe(200)
    const page = await shown.text()
    expect(page).toContain('<form method="post"')
    expect(page).toContain('новые отклики на ваши проекты')
    expect(await env.DB.prepare('SELECT 1 FROM preferences WHERE user_id = ?1').bind(userId).first()).toBeNull()

    const body = 'List-Unsubscribe=One-Click'
    const form = { 'content-type': 'application/x-www-form-urlencoded' }
    expect((await fetchWorker(path, { method: 'POST', headers: form, body })).status).toBe(200)
    const stored = await env.DB.prepare(
      'SELECT kind, channel, enabled, source, updated_at FROM preferences WHERE user_id = ?1',
    )
      .bind(userId)
      .all<{ updated_at: string }>()
    expect(stored.results).toEqual([
      expect.objectContaining({ kind: 'ResponseCreated', channel: 'email', enabled: 0, source: 'unsubscribe' }),
    ])
    expect((await fetchWorker(path, { method: 'POST', headers: form, body })).status).toBe(200)
    const again = await env.DB.prepare('SELECT updated_at FROM preferences WHERE user_id = ?1').bind(userId).all()
    expect(again.results).toEqual([{ updated_at: stored.results[0]?.updated_at }])

    const next = responseTo(userId)
    const optedOut = await ended(next, 'opted-out')
    expect(optedOut.status_reason).toContain('ResponseCreated')
    expect(await sentMessagesOf(eventIdOf(next))).toEqual([])
    const story = (await (await admin(`/v1/events/${eventIdOf(next)}`)).json()) as {
      processed: { outcome: string }[]
      notifications: { status: string }[]
    }
    expect(story.processed[0]?.outcome).toBe('opted-out')
    expect(story.notifications[0]?.status).toBe('opted-out')
    await ended(invitationTo(userId), 'sent')
  })

  it('an opt-out after the email was written but before it is sent holds at dispatch', async () => {
    const userId = guid()
    const event = responseTo(userId)
    await deliver(event, 1)
    await eventually(async () => expect((await notificationsOf(eventIdOf(event)))[0]?.status).toBe('pending'))
    const [row] = await notificationsOf(eventIdOf(event))
    const put = await admin(`/v1/preferences/${userId}`, {
      method: 'PUT',
      body: JSON.stringify({ preferences: [{ kind: 'ResponseCreated', channel: 'email', enabled: false }] }),
    })
    expect(put.status).toBe(200)
    await deliver({ notificationId: row?.id }, 1, `msg-${guid()}`, 'notify-dispatch')
    expect((await notificationsOf(eventIdOf(event)))[0]?.status).toBe('opted-out')
    expect(await sentMessagesOf(eventIdOf(event))).toEqual([])
  })

  it('the template can place the same link in the body ({{ unsubscribeUrl }})', async () => {
    const userId = guid()
    await seedContact(userId, { locale: 'en-GB' })
    const template = {
      subject: 'New response',
      textBody: 'Hello {{ recipientName }}. Unsubscribe: {{ unsubscribeUrl }}',
      htmlBody: '<p><a href="{{ unsubscribeUrl }}">Unsubscribe</a></p>',
    }
    expect(
      (await admin('/v1/templates/ResponseCreated/en/email', { method: 'PUT', body: JSON.stringify(template) })).status,
    ).toBe(200)
    const event = responseTo(userId)
    await ended(event, 'sent')
    const mail = parseMime(await rawOf(event))
    const link = /<([^>]+)>/.exec(mail.headers['list-unsubscribe'] as string)?.[1] as string
    expect(mail.text).toContain(`Unsubscribe: ${link}`)
    expect(mail.html).toContain(`href="${link.replaceAll('&', '&amp;')}"`)
  })

  it(`5,000 forged, cut, re-assembled and foreign tokens: every one refused (400), no preference written`, async () => {
    const a = await signUnsubscribe({ userId: guid(), kind: 'ResponseCreated', channel: 'email' }, KEY)
    const b = await signUnsubscribe({ userId: guid(), kind: 'InvitationCreated', channel: 'email' }, KEY)
    const foreign = await signUnsubscribe(
      { userId: guid(), kind: 'ResponseCreated', channel: 'email' },
      'another-key-of-someone-else-0123456789',
    )
    const transactional = await signUnsubscribe({ userId: guid(), kind: 'VerificationApproved', channel: 'email' }, KEY)
    const [va, pa, ma] = a.split('.') as [string, string, string]
    const [, pb, mb] = b.split('.') as [string, string, string]
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.%'
    const mutation = fc.oneof(
      // one character changed
      fc
        .tuple(fc.nat(a.length - 1), fc.constantFrom(...alphabet))
        .map(([at, char]) =>
          a[at] === char
            ? `${a.slice(0, at)}${char === 'A' ? 'B' : 'A'}${a.slice(at + 1)}`
            : `${a.slice(0, at)}${char}${a.slice(at + 1)}`,
        ),
      // cut short, or padded
      fc.nat(a.length - 1).map((length) => a.slice(0, length)),
      fc.string({ minLength: 1, maxLength: 8 }).map((tail) => `${a}${tail}`),
      // another token's payload under this MAC, and the other way round
      fc.constantFrom(`${va}.${pb}.${ma}`, `${va}.${pa}.${mb}`, `v2.${pa}.${ma}`, `${pa}.${ma}`, `${va}..${ma}`),
      // signed with a key this Worker does not have; a kind nobody may turn off
      fc.constantFrom(foreign, transactional),
      // anything at all
      fc.string({ maxLength: 300 }),
      fc.base64String({ maxLength: 200 }).map((text) => `v1.${text}.${ma}`),
    )
    const before = await preferenceRows()
    const samples = fc.sample(mutation, { numRuns: 5000, seed: 20261130 })
    let refused = 0
    for (const token of samples) {
      // The genuine links, and the empty one (`/u/` is no route at all: 404).
      if (token === a || token === b || token === '') continue
      const path = `/u/${encodeURIComponent(token)}`
      const response = await exports.default.fetch(new Request(`http://worker${path}`, { method: 'POST' }))
      expect(response.status, token).toBe(400)
      const error = ((await response.json()) as { error: { code: string; issues: { field: string }[] } }).error
      expect(error.code).toBe('INVALID_REQUEST')
      expect(error.issues[0]?.field).toBe('token')
      refused += 1
    }
    expect(refused).toBeGreaterThan(4900)
    expect(await preferenceRows()).toBe(before)
    // A browser gets a page that says so, in its language.
    const page = await fetchWorker(`/u/${foreign}`, {
      method: 'POST',
      headers: { accept: 'text/html', 'accept-language': 'en' },
    })
    expect(page.status).toBe(400)
    expect(await page.text()).toContain('Nothing was changed')
    // The genuine one still works.
    expect((await fetchWorker(`/u/${a}`, { method: 'POST' })).status).toBe(200)
    expect(await preferenceRows()).toBe(before + 1)
  })

  it('after a key rotation, links signed with the previous key still work', async () => {
    const previous = KEY
    const next = 'rotated-unsubscribe-signing-key-9876543210'
    const userId = guid()
    const old = await signUnsubscribe({ userId, kind: 'InvitationCreated', channel: 'email' }, previous)
    const vars = { UNSUBSCRIBE_SIGNING_KEY: next, UNSUBSCRIBE_SIGNING_KEY_PREVIOUS: previous }
    expect((await fetchWorker(`/u/${old}`, { method: 'POST' }, vars)).status).toBe(200)
    expect(await env.DB.prepare('SELECT enabled FROM preferences WHERE user_id = ?1').bind(userId).first()).toEqual({
      enabled: 0,
    })
    // Without the previous key, it is refused.
    const stranger = await signUnsubscribe({ userId: guid(), kind: 'InvitationCreated', channel: 'email' }, previous)
    expect((await fetchWorker(`/u/${stranger}`, { method: 'POST' }, { UNSUBSCRIBE_SIGNING_KEY: next })).status).toBe(
      400,
    )
  })
})

describe("a link's page and an API answer", () => {
  it('each carry a policy that loads and runs nothing and lets no other site frame them', async () => {
    const token = await signUnsubscribe({ userId: guid(), kind: 'InvitationCreated', channel: 'email' }, KEY)
    for (const [path, init] of [
      [`/u/${token}`, {}],
      [`/u/${token}`, { method: 'POST' }],
      [`/u/${token.slice(0, -2)}xx`, {}],
    ] as const) {
      const page = await fetchWorker(path, { ...init, headers: { accept: 'text/html' } })
      expect(page.headers.get('content-type'), path).toMatch(/^text\/html/)
      // The page's one style is its body's attribute, and its one form posts to the link.
      expect(page.headers.get('content-security-policy'), path).toBe(
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
      )
    }
    for (const path of ['/healthz', '/v1/dead-letters', '/v1/nothing-here']) {
      const answer = await admin(path)
      expect(answer.headers.get('content-security-policy'), path).toBe(
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
      )
    }
  })
})

describe('/v1/preferences', () => {
  it('shows every optional kind with its default, stores choices, and refuses to turn off a transactional kind', async () => {
    const userId = guid()
    const initial = (await (await admin(`/v1/preferences/${userId}`)).json()) as {
      preferences: { kind: string; enabled: boolean; source: string | null }[]
      transactional: string[]
    }
    expect(initial.preferences).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'ResponseCreated', enabled: true, source: null }),
        expect.objectContaining({ kind: 'InvitationCreated', enabled: true, source: null }),
      ]),
    )
    expect(initial.transactional).toEqual(
      expect.arrayContaining(['VerificationSubmitted', 'VerificationApproved', 'VerificationRejected']),
    )
    const refused = await admin(`/v1/preferences/${userId}`, {
      method: 'PUT',
      body: JSON.stringify({
        preferences: [
          { kind: 'InvitationCreated', channel: 'email', enabled: false },
          { kind: 'VerificationRejected', channel: 'email', enabled: false },
          { kind: 'NoSuchKind', channel: 'email', enabled: false },
        ],
      }),
    })
    expect(refused.status).toBe(400)
    const issues = ((await refused.json()) as { error: { issues: { field: string }[] } }).error.issues
    expect(issues.map((issue) => issue.field)).toEqual(['preferences[1].kind', 'preferences[2].kind'])
    expect(await env.DB.prepare('SELECT 1 FROM preferences WHERE user_id = ?1').bind(userId).first()).toBeNull()

    const saved = await admin(`/v1/preferences/${userId}`, {
      method: 'PUT',
      body: JSON.stringify({ preferences: [{ kind: 'InvitationCreated', channel: 'email', enabled: false }] }),
    })
    expect(((await saved.json()) as typeof initial).preferences).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'InvitationCreated', enabled: false, source: 'api' })]),
    )
    await ended(invitationTo(userId), 'opted-out')
    await admin(`/v1/preferences/${userId}`, {
      method: 'PUT',
      body: JSON.stringify({ preferences: [{ kind: 'InvitationCreated', channel: 'email', enabled: true }] }),
    })
    await ended(invitationTo(userId), 'sent')
  })
})
