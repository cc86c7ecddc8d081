/**
 * Recipients choose how an optional kind reaches them: instant, digest (where
 * the kind has one) or off — through `/v1/preferences` and through the page of
 * their link — and planning follows the choice. The one-click unsubscribe
 * (test/preferences.test.ts) is the same opt-out as "off".
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { deliveryModeOf, deliveryOf } from '../src/events/registry.ts'
import { scheduleInWords } from '../src/preferences/page.ts'
import { signUnsubscribe } from '../src/preferences/token.ts'
import { ADMIN_TOKEN, deliverBatch, freshInbound, guid, notificationsOf } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const KEY = 'test-unsubscribe-signing-key-0123456789'

type View = {
  preferences: {
    kind: string
    channel: string
    enabled: boolean
    source: string | null
    mode: string | null
    defaultMode: string
    modes: string[]
    inEffect: string
    digest: unknown
  }[]
}

const admin = (path: string, init: RequestInit = {}) =>
  fetchWorker(path, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })

const putPreferences = (userId: string, preferences: unknown[]) =>
  admin(`/v1/preferences/${userId}`, { method: 'PUT', body: JSON.stringify({ preferences }) })

const entryOf = (view: View, kind: string) => view.preferences.find((entry) => entry.kind === kind)

async function storedRow(userId: string, kind = 'ResponseCreated') {
  return env.DB.prepare('SELECT enabled, mode, source FROM preferences WHERE user_id = ?1 AND kind = ?2')
    .bind(userId, kind)
    .first<{ enabled: number; mode: string | null; source: string }>()
}

/** The path of `userId`'s link for `kind` by email. */
async function linkOf(userId: string, kind: string): Promise<string> {
  return `/u/${await signUnsubscribe({ userId, kind, channel: 'email' }, KEY)}`
}

/** A browser's GET of the link's page. */
async function pageOf(path: string, language = 'en') {
  const response = await fetchWorker(path, { headers: { accept: 'text/html', 'accept-language': language } })
  return { status: response.status, text: await response.text() }
}

/** The page's form, posted as a browser posts it. */
function postForm(path: string, fields: Record<string, string>, accept = 'text/html') {
  return fetchWorker(path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept, 'accept-language': 'en' },
    body: new URLSearchParams(fields).toString(),
  })
}

/** The value of the radio button checked on a choice page. */
const checkedOf = (page: string) => /value="(\w+)" checked/.exec(page)?.[1]

/** A response.created to `userId`, delivered to the events consumer; the status of its notification. */
async function statusOfResponseTo(userId: string): Promise<string | undefined> {
  let eventId = ''
  const message = freshInbound('response.created', (value) => {
    const recipient = (value.data as { recipient: Record<string, unknown> }).recipient
    recipient.userId = userId
    recipient.email = `choice-${userId.slice(0, 8)}@example.com`
    eventId = (value.envelope as { eventId: string }).eventId
  })
  const result = await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: message }])
  expect(result.explicitAcks).toHaveLength(1)
  const row = await env.DB.prepare('SELECT status FROM notifications WHERE event_id = ?1')
    .bind(eventId)
    .first<{ status: string }>()
  expect(await notificationsOf(eventId)).toHaveLength(1)
  return row?.status
}

describe('a digest schedule in words', () => {
  it('says windows in minutes or hours and daily times, with Russian plural forms', () => {
    const every = (minutes: number, locale: 'ru' | 'en') => scheduleInWords(locale, { window: { minutes } })
    expect(every(10, 'ru')).toBe('одно письмо раз в 10 минут')
    expect(every(10, 'en')).toBe('one email every 10 minutes')
    expect([1, 2, 5, 21, 22].map((minutes) => every(minutes, 'ru'))).toEqual([
      'одно письмо раз в минуту',
      'одно письмо раз в 2 минуты',
      'одно письмо раз в 5 минут',
      'одно письмо раз в 21 минуту',
      'одно письмо раз в 22 минуты',
    ])
    expect([60, 120, 300].map((minutes) => every(minutes, 'ru'))).toEqual([
      'одно письмо раз в час',
      'одно письмо раз в 2 часа',
      'одно письмо раз в 5 часов',
    ])
    expect([1, 60, 90, 120].map((minutes) => every(minutes, 'en'))).toEqual([
      'one email every minute',
      'one email every hour',
      'one email every 90 minutes',
      'one email every 2 hours',
    ])
    expect(scheduleInWords('ru', { daily: { at: '09:00' } })).toBe('одно письмо в день, в 09:00 по вашему времени')
    expect(scheduleInWords('en', { daily: { at: '18:30' } })).toBe('one email a day, at 18:30 your time')
  })
})

describe('/v1/preferences: mode', () => {
  it('shows the modes each kind offers, its default and the choice; stores a mode and keeps it through off and on', async () => {
    const userId = guid()
    const initial = (await (await admin(`/v1/preferences/${userId}`)).json()) as View
    // Whatever ResponseCreated's default is (instant today, digest soon), the view says it.
    const responseDefault = deliveryModeOf('ResponseCreated', 'email', undefined)
    expect(entryOf(initial, 'ResponseCreated')).toEqual({
      kind: 'ResponseCreated',
      channel: 'email',
      enabled: true,
      source: null,
      updatedAt: null,
      mode: null,
      defaultMode: responseDefault,
      modes: ['instant', 'digest'],
      inEffect: responseDefault,
      digest: { window: { minutes: 10 } },
    })
    expect(entryOf(initial, 'InvitationCreated')).toMatchObject({
      mode: null,
      defaultMode: 'instant',
      modes: ['instant'],
      inEffect: 'instant',
      digest: null,
    })

    const digest = await putPreferences(userId, [
      { kind: 'ResponseCreated', channel: 'email', enabled: true, mode: 'digest' },
    ])
    expect(digest.status).toBe(200)
    expect(entryOf((await digest.json()) as View, 'ResponseCreated')).toMatchObject({
      enabled: true,
      mode: 'digest',
      inEffect: 'digest',
      source: 'api',
    })
    expect(await storedRow(userId)).toEqual({ enabled: 1, mode: 'digest', source: 'api' })

    // Off without a mode keeps the mode for when it is turned on again (the old writes, unchanged).
    const off = await putPreferences(userId, [{ kind: 'ResponseCreated', channel: 'email', enabled: false }])
    expect(entryOf((await off.json()) as View, 'ResponseCreated')).toMatchObject({
      enabled: false,
      mode: 'digest',
      inEffect: 'off',
    })
    const on = await putPreferences(userId, [{ kind: 'ResponseCreated', channel: 'email', enabled: true }])
    expect(entryOf((await on.json()) as View, 'ResponseCreated')).toMatchObject({ enabled: true, inEffect: 'digest' })

    const instant = await putPreferences(userId, [
      { kind: 'ResponseCreated', channel: 'email', enabled: true, mode: 'instant' },
    ])
    expect(entryOf((await instant.json()) as View, 'ResponseCreated')).toMatchObject({
      mode: 'instant',
      inEffect: 'instant',
    })
    // null: back to the kind's default.
    const reset = await putPreferences(userId, [
      { kind: 'ResponseCreated', channel: 'email', enabled: true, mode: null },
    ])
    expect(entryOf((await reset.json()) as View, 'ResponseCreated')).toMatchObject({
      mode: null,
      inEffect: responseDefault,
    })
    expect(await storedRow(userId)).toEqual({ enabled: 1, mode: null, source: 'api' })
  })

  it('refuses digest for a kind without one and any choice for a transactional kind, naming the field; writes nothing', async () => {
    // The premise: InvitationCreated is optional and has no digest on email.
    expect(deliveryOf('InvitationCreated', 'email').digest).toBeUndefined()
    const userId = guid()
    const refused = await putPreferences(userId, [
      { kind: 'ResponseCreated', channel: 'email', enabled: true, mode: 'digest' },
      { kind: 'InvitationCreated', channel: 'email', enabled: true, mode: 'digest' },
      { kind: 'VerificationRejected', channel: 'email', enabled: true, mode: 'instant' },
    ])
    expect(refused.status).toBe(400)
    const error = ((await refused.json()) as { error: { code: string; issues: { field: string; message: string }[] } })
      .error
    expect(error.code).toBe('INVALID_REQUEST')
    expect(error.issues).toEqual([
      {
        field: 'preferences[1].mode',
        message: 'InvitationCreated has no digest on email: it is sent at once or not at all',
      },
      { field: 'preferences[2].kind', message: 'VerificationRejected is transactional: always sent' },
    ])
    // A mode the API does not know is refused by the schema, naming the field too.
    const unknown = await putPreferences(userId, [
      { kind: 'ResponseCreated', channel: 'email', enabled: true, mode: 'weekly' },
    ])
    expect(unknown.status).toBe(400)
    const issues = ((await unknown.json()) as { error: { issues: { field: string }[] } }).error.issues
    expect(issues.map((issue) => issue.field)).toEqual(['preferences[0].mode'])
    expect(await env.DB.prepare('SELECT 1 FROM preferences WHERE user_id = ?1').bind(userId).first()).toBeNull()
    // Instant is the one mode of a kind without a digest: accepted.
    const instant = await putPreferences(userId, [
      { kind: 'InvitationCreated', channel: 'email', enabled: true, mode: 'instant' },
    ])
    expect(instant.status).toBe(200)
  })
})

describe('the page of a link: instant, digest or off', () => {
  it('offers the three choices for ResponseCreated with its schedule in words; saves digest, off and instant', async () => {
    const userId = guid()
    const path = await linkOf(userId, 'ResponseCreated')
    const shown = await pageOf(path)
    expect(shown.status).toBe(200)
    for (const choice of ['instant', 'digest', 'off'])
      expect(shown.text).toContain(`type="radio" name="mode" value="${choice}"`)
    expect(shown.text).toContain('Together: one email every 10 minutes')
    expect(shown.text).toContain('new responses to your projects')
    expect(checkedOf(shown.text)).toBe(deliveryModeOf('ResponseCreated', 'email', undefined))
    expect((await pageOf(path, 'ru-RU,ru;q=0.9')).text).toContain('Сводкой: одно письмо раз в 10 минут')
    // A GET changes nothing.
    expect(await storedRow(userId)).toBeNull()

    const digest = await postForm(path, { mode: 'digest' })
    expect(digest.status).toBe(200)
    expect(await digest.text()).toContain('will come together: one email every 10 minutes')
    expect(await storedRow(userId)).toEqual({ enabled: 1, mode: 'digest', source: 'unsubscribe' })
    expect(checkedOf((await pageOf(path)).text)).toBe('digest')

    // Off is the one-click opt-out; the mode stays for when they turn it on again.
    const off = await postForm(path, { mode: 'off' })
    expect(off.status).toBe(200)
    expect(await off.text()).toContain('You will get no more emails about new responses to your projects.')
    expect(await storedRow(userId)).toEqual({ enabled: 0, mode: 'digest', source: 'unsubscribe' })
    expect(checkedOf((await pageOf(path)).text)).toBe('off')

    // Choosing a mode turns the kind back on.
    expect((await postForm(path, { mode: 'instant' })).status).toBe(200)
    expect(await storedRow(userId)).toEqual({ enabled: 1, mode: 'instant', source: 'unsubscribe' })
    expect(checkedOf((await pageOf(path)).text)).toBe('instant')
  })

  it('keeps the one-click question for a kind without a digest, and refuses digest for it; nothing written', async () => {
    const userId = guid()
    const path = await linkOf(userId, 'InvitationCreated')
    const shown = await pageOf(path)
    expect(shown.text).toContain('<input type="hidden" name="List-Unsubscribe" value="One-Click">')
    expect(shown.text).not.toContain('type="radio"')

    const page = await postForm(path, { mode: 'digest' })
    expect(page.status).toBe(400)
    expect(await page.text()).toContain('Nothing was changed')
    const coded = await postForm(path, { mode: 'digest' }, 'application/json')
    expect(coded.status).toBe(400)
    expect(((await coded.json()) as { error: { code: string; issues: unknown[] } }).error).toMatchObject({
      code: 'INVALID_REQUEST',
      issues: [
        {
          field: 'mode',
          message: 'InvitationCreated has no digest on email: it is sent at once or not at all; nothing was changed',
        },
      ],
    })
    const unknown = await postForm(await linkOf(userId, 'ResponseCreated'), { mode: 'weekly' }, 'application/json')
    expect(unknown.status).toBe(400)
    expect(((await unknown.json()) as { error: { issues: { field: string }[] } }).error.issues[0]?.field).toBe('mode')
    expect(await env.DB.prepare('SELECT 1 FROM preferences WHERE user_id = ?1').bind(userId).first()).toBeNull()
  })

  it('the one-click POST still opts out after a choice, whatever else its form carries', async () => {
    const userId = guid()
    const path = await linkOf(userId, 'ResponseCreated')
    expect((await postForm(path, { mode: 'digest' })).status).toBe(200)
    // RFC 8058's body wins over a mode beside it.
    const oneClick = await postForm(path, { 'List-Unsubscribe': 'One-Click', mode: 'digest' })
    expect(oneClick.status).toBe(200)
    expect(await storedRow(userId)).toEqual({ enabled: 0, mode: 'digest', source: 'unsubscribe' })

    // As multipart/form-data (RFC 8058 allows either), a choice and the one-click both read.
    const multipart = (fields: Record<string, string>) => {
      const body = new FormData()
      for (const [name, value] of Object.entries(fields)) body.set(name, value)
      return fetchWorker(path, { method: 'POST', body })
    }
    expect((await multipart({ mode: 'instant' })).status).toBe(200)
    expect(await storedRow(userId)).toEqual({ enabled: 1, mode: 'instant', source: 'unsubscribe' })
    expect((await multipart({ 'List-Unsubscribe': 'One-Click' })).status).toBe(200)
    expect(await storedRow(userId)).toEqual({ enabled: 0, mode: 'instant', source: 'unsubscribe' })

    // A body far larger than the page's form is not read as a choice: the POST of the link opts out.
    expect((await postForm(path, { mode: 'digest' })).status).toBe(200)
    expect((await postForm(path, { mode: 'digest', padding: 'x'.repeat(10_000) })).status).toBe(200)
    expect(await storedRow(userId)).toEqual({ enabled: 0, mode: 'digest', source: 'unsubscribe' })

    // A POST without a body (some providers), for another user: opted out too.
    const other = guid()
    expect((await fetchWorker(await linkOf(other, 'ResponseCreated'), { method: 'POST' })).status).toBe(200)
    expect(await storedRow(other)).toEqual({ enabled: 0, mode: null, source: 'unsubscribe' })
  })
})

describe('planning follows the choice', () => {
  it('a response.created to a recipient who chose digest is digested; to one who chose instant, it is not', async () => {
    const digestUser = guid()
    expect((await postForm(await linkOf(digestUser, 'ResponseCreated'), { mode: 'digest' })).status).toBe(200)
    expect(await statusOfResponseTo(digestUser)).toBe('digested')

    // Chosen explicitly, so this holds whatever ResponseCreated's default is.
    const instantUser = guid()
    const put = await putPreferences(instantUser, [
      { kind: 'ResponseCreated', channel: 'email', enabled: true, mode: 'instant' },
    ])
    expect(put.status).toBe(200)
    expect(['pending', 'sending', 'sent']).toContain(await statusOfResponseTo(instantUser))

    // Off from the page: opted out, like the one-click link.
    const offUser = guid()
    expect((await postForm(await linkOf(offUser, 'ResponseCreated'), { mode: 'off' })).status).toBe(200)
    expect(await statusOfResponseTo(offUser)).toBe('opted-out')
  })
})
