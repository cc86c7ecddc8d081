/**
 * Signing in to the console: the token form's session cookie (its flags, its
 * signature, its end when the token or the key goes), and Cloudflare Access
 * (a JWT verified against the team's keys: the right audience, issuer, expiry
 * and signature, or no way in).
 */
import { createExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { importJWK, SignJWT } from 'jose'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import { FAKE_ACCESS_TEAM } from './fake-resend.ts'
import keys from './fixtures/access-keys.json'
import { ADMIN_TOKEN, runCron } from './helpers.ts'

const KEY = 'test-console-session-key-0123456789abcdef'
const VIEWER_TOKEN = 'test-viewer-token-0123456789'
const WITH_VIEWER = { VIEWER_TOKEN }
const AUD = 'test-access-audience-0123456789abcdef'

async function request(path: string, init: RequestInit = {}, vars: Record<string, string> = {}) {
  const response = await worker.fetch(
    new Request(`http://worker${path}`, { redirect: 'manual', ...init }),
    { ...env, ...vars } as Env,
    createExecutionContext(),
  )
  return { status: response.status, headers: response.headers, text: await response.text() }
}

async function signIn(token: string, vars: Record<string, string> = {}) {
  const answer = await request(
    '/console/sign-in',
    {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
      body: new URLSearchParams({ token }).toString(),
    },
    vars,
  )
  const cookie = answer.headers.get('set-cookie') ?? ''
  return { answer, cookie, value: cookie.split(';')[0] ?? '' }
}

const withCookie = (value: string) => ({ headers: { cookie: value } })

describe('the token form', () => {
  it('opens a session with an HttpOnly, Secure, SameSite=Strict cookie; a wrong or ingest token opens none', async () => {
    const { answer, cookie, value } = await signIn(ADMIN_TOKEN)
    expect(answer.status).toBe(303)
    expect(answer.headers.get('location')).toBe('/console')
    expect(cookie).toMatch(/^__Host-notify-edge-console=/)
    expect(cookie).toMatch(/HttpOnly/)
    expect(cookie).toMatch(/Secure/)
    expect(cookie).toMatch(/SameSite=Strict/)
    expect(cookie).toMatch(/Max-Age=28800/)
    expect((await request('/console', withCookie(value))).status).toBe(200)
    for (const token of ['not-a-token-at-all-0123', 'test-ingest-token-0123456789']) {
      const refused = await signIn(token)
      expect(refused.answer.headers.get('location')).toBe('/console/sign-in?failed=1')
      expect(refused.cookie).toBe('')
    }
  })

  it('a tampered or foreign cookie is no session', async () => {
    const { value } = await signIn(ADMIN_TOKEN)
    const [name, payload] = value.split('=')
    const [body, mac] = (payload ?? '').split('.')
    const forged = JSON.parse(atob((body ?? '').replaceAll('-', '+').replaceAll('_', '/')))
    forged.role = 'admin'
    forged.name = 'someone else'
    const reencoded = btoa(JSON.stringify(forged)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')
    for (const cookie of [`${name}=${reencoded}.${mac}`, `${name}=${body}.AAAA`, `${name}=garbage`]) {
      const answer = await request('/console', withCookie(cookie))
      expect(answer.status, cookie).toBe(303)
      expect(answer.headers.get('location')).toBe('/console/sign-in')
    }
  })

  it('rotating the session key keeps sessions while the previous key is set; removing the token ends them', async () => {
    const { value } = await signIn(ADMIN_TOKEN)
    const rotated = {
      CONSOLE_SESSION_KEY: 'next-console-session-key-0123456789abcdef',
      CONSOLE_SESSION_KEY_PREVIOUS: KEY,
    }
    expect((await request('/console', withCookie(value), rotated)).status).toBe(200)
    const keyGone = { CONSOLE_SESSION_KEY: 'next-console-session-key-0123456789abcdef' }
    expect((await request('/console', withCookie(value), keyGone)).status).toBe(303)
    // The admin token rotated and its previous value removed: the session opened with it is over.
    const tokenRotated = { ADMIN_TOKEN: 'next-admin-token-0123456789', ADMIN_TOKEN_PREVIOUS: ADMIN_TOKEN }
    expect((await request('/console', withCookie(value), tokenRotated)).status).toBe(200)
    expect((await request('/console', withCookie(value), { ADMIN_TOKEN: 'next-admin-token-0123456789' })).status).toBe(
      303,
    )
  })
})

describe('a session ends', () => {
  /** The session's id and CSRF token, read from its cookie's payload. */
  function sessionOf(value: string): { sid: string; csrf: string } {
    const payload = value.split('=')[1]?.split('.')[0] ?? ''
    return JSON.parse(atob(payload.replaceAll('-', '+').replaceAll('_', '/')))
  }
  const post = (path: string, value: string) =>
    request(path, {
      method: 'POST',
      headers: { cookie: value, origin: 'http://worker', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: sessionOf(value).csrf }).toString(),
    })
  const opens = async (value: string) => (await request('/console', withCookie(value))).status === 200
  const setRow = (value: string, columns: { seen?: number; created?: number }) =>
    env.DB.prepare(
      'UPDATE console_sessions SET seen_at = coalesce(?2, seen_at), created_at = coalesce(?3, created_at) WHERE id = ?1',
    )
      .bind(
        sessionOf(value).sid,
        columns.seen === undefined ? null : new Date(Date.now() - columns.seen).toISOString(),
        columns.created === undefined ? null : new Date(Date.now() - columns.created).toISOString(),
      )
      .run()

  it('when its operator signs out: the same cookie, sent again, opens nothing', async () => {
    const { value } = await signIn(ADMIN_TOKEN)
    const other = await signIn(ADMIN_TOKEN)
    expect(await opens(value)).toBe(true)
    const out = await post('/console/sign-out', value)
    expect(out.status).toBe(303)
    expect(out.headers.get('location')).toBe('/console/sign-in')
    // The cookie was kept (a copy, a stolen one): it is over all the same.
    expect(await opens(value)).toBe(false)
    // Another session of the same token is another session.
    expect(await opens(other.value)).toBe(true)
  })

  it('for everyone when an admin says so, audited; a viewer may not', async () => {
    const admin = await signIn(ADMIN_TOKEN)
    const viewer = await signIn(VIEWER_TOKEN, WITH_VIEWER)
    const viewerOpens = async () => (await request('/console', withCookie(viewer.value), WITH_VIEWER)).status === 200
    expect(await viewerOpens()).toBe(true)
    const refused = await request(
      '/console/sessions/end-all',
      {
        method: 'POST',
        headers: { cookie: viewer.value, origin: 'http://worker', 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: sessionOf(viewer.value).csrf }).toString(),
      },
      WITH_VIEWER,
    )
    expect(refused.status).toBe(403)
    expect(await viewerOpens()).toBe(true)
    const page = await request('/console/audit', withCookie(admin.value))
    expect(page.text).toMatch(/<p>[1-9]\d* open \(used in the last 30 min, at most 8 h after signing in\)/)
    expect(page.text).toContain('action="/console/sessions/end-all"')

    const ended = await post('/console/sessions/end-all', admin.value)
    expect(ended.status).toBe(303)
    expect(await viewerOpens()).toBe(false)
    expect(await opens(admin.value)).toBe(false)
    const { results } = await env.DB.prepare(
      "SELECT actor, affected FROM audit_log WHERE action = 'console.sessions.end-all' ORDER BY id DESC LIMIT 1",
    ).all<{ actor: string; affected: number }>()
    expect(results[0]?.actor).toBe('admin token')
    expect(results[0]?.affected).toBeGreaterThanOrEqual(2)
    expect(await env.DB.prepare('SELECT count(*) AS n FROM console_sessions WHERE ended_at IS NULL').first()).toEqual({
      n: 0,
    })
  })

  it('after 30 idle minutes, each use renewing it; and 8 hours after sign-in, however used', async () => {
    const { value } = await signIn(ADMIN_TOKEN)
    // Used 20 minutes ago: still open, and this use renews it.
    await setRow(value, { seen: 20 * 60_000 })
    expect(await opens(value)).toBe(true)
    const seen = await env.DB.prepare('SELECT seen_at FROM console_sessions WHERE id = ?1')
      .bind(sessionOf(value).sid)
      .first<{ seen_at: string }>()
    expect(Date.now() - Date.parse(seen?.seen_at ?? '')).toBeLessThan(20 * 60_000)
    // Used 30 seconds ago: open, and not written again (at most one write a minute per session).
    await setRow(value, { seen: 30_000 })
    const before = await env.DB.prepare('SELECT seen_at FROM console_sessions WHERE id = ?1')
      .bind(sessionOf(value).sid)
      .first<{ seen_at: string }>()
    expect(await opens(value)).toBe(true)
    expect(
      await env.DB.prepare('SELECT seen_at FROM console_sessions WHERE id = ?1').bind(sessionOf(value).sid).first(),
    ).toEqual(before)
    // Unused for 31 minutes: over.
    await setRow(value, { seen: 31 * 60_000 })
    expect(await opens(value)).toBe(false)
    // Used a moment ago, but signed in 8 hours and a minute ago: over.
    const late = await signIn(ADMIN_TOKEN)
    await setRow(late.value, { created: 8 * 3_600_000 + 60_000 })
    expect(await opens(late.value)).toBe(false)
  })

  it("rows of sessions long over are deleted by retention; a live one's row stays", async () => {
    const old = await signIn(ADMIN_TOKEN)
    const live = await signIn(ADMIN_TOKEN)
    await setRow(old.value, { seen: 3 * 24 * 3_600_000, created: 3 * 24 * 3_600_000 })
    await runCron(new Date())
    const ids = async (value: string) =>
      (await env.DB.prepare('SELECT id FROM console_sessions WHERE id = ?1').bind(sessionOf(value).sid).all()).results
        .length
    expect(await ids(old.value)).toBe(0)
    expect(await ids(live.value)).toBe(1)
  })
})

describe('without CONSOLE_SESSION_KEY', () => {
  it('the console is closed: the sign-in page says so, and nothing opens a session', async () => {
    const closed = { CONSOLE_SESSION_KEY: undefined } as unknown as Record<string, string>
    const page = await request('/console/sign-in', {}, closed)
    expect(page.status).toBe(503)
    expect(page.text).toContain('The console is closed')
    expect((await request('/console', {}, closed)).headers.get('location')).toBe('/console/sign-in')
  })
})

describe('Cloudflare Access', () => {
  const access = {
    ACCESS_TEAM_DOMAIN: FAKE_ACCESS_TEAM,
    ACCESS_AUD: AUD,
    ACCESS_ADMINS: 'lead@example.com',
  }
  async function jwt(claims: Record<string, unknown>, options: { expiresIn?: string; key?: CryptoKey } = {}) {
    const key = options.key ?? ((await importJWK(keys.private, 'RS256')) as CryptoKey)
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: 'test-access-key' })
      .setIssuer(`https://${FAKE_ACCESS_TEAM}`)
      .setAudience((claims.aud as string | undefined) ?? AUD)
      .setIssuedAt()
      .setExpirationTime(options.expiresIn ?? '5m')
      .sign(key)
  }
  const asAccess = (assertion: string) => ({ headers: { 'cf-access-jwt-assertion': assertion } })

  it('a valid JWT signs its e-mail in, as admin when listed in ACCESS_ADMINS and as viewer otherwise', async () => {
    const lead = await request('/console', asAccess(await jwt({ email: 'lead@example.com' })), access)
    expect(lead.status).toBe(200)
    expect(lead.text).toContain('lead@example.com (admin)')
    expect(lead.headers.get('set-cookie')).toMatch(/^__Host-notify-edge-console=.*HttpOnly/)
    const other = await request('/console', asAccess(await jwt({ email: 'other@example.com' })), access)
    expect(other.text).toContain('other@example.com (viewer)')
  })

  it('a JWT for another audience, expired, or signed by another key lets no one in', async () => {
    const { privateKey } = (await crypto.subtle.generateKey(
      { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' },
      true,
      ['sign', 'verify'],
    )) as CryptoKeyPair
    const refused = [
      await jwt({ email: 'lead@example.com', aud: 'another-application-audience' }),
      await jwt({ email: 'lead@example.com' }, { expiresIn: '-1m' }),
      await jwt({ email: 'lead@example.com' }, { key: privateKey }),
      'not.a.jwt',
    ]
    for (const assertion of refused) {
      const answer = await request('/console', asAccess(assertion), access)
      expect(answer.status).toBe(303)
      expect(answer.headers.get('location')).toBe('/console/sign-in')
    }
  })

  it('a session opened by Access ends when Access no longer vouches for that person', async () => {
    const first = await request('/console', asAccess(await jwt({ email: 'lead@example.com' })), access)
    const cookie = (first.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
    expect((await request('/console', withCookie(cookie), access)).status).toBe(303)
    const both = { headers: { cookie, 'cf-access-jwt-assertion': await jwt({ email: 'lead@example.com' }) } }
    expect((await request('/console', both, access)).status).toBe(200)
  })
})

describe('a body too large', () => {
  /** A form body that says it is `length` bytes long, and records whether anything read it. */
  function claimedBody(length: number) {
    const read = { pulled: false }
    // A high-water mark of 0: pulled only when a reader asks, not to fill a queue ahead.
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          read.pulled = true
          controller.enqueue(new TextEncoder().encode('token=x'))
          controller.close()
        },
      },
      { highWaterMark: 0 },
    )
    const init = {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': String(length),
        origin: 'http://worker',
      },
      body,
      duplex: 'half',
    } as RequestInit
    return { init, read }
  }

  it('is refused by its length before anything reads it: the sign-in form anyone may post takes 8 KiB', async () => {
    const { init, read } = claimedBody(60_000_000)
    const answer = await request('/console/sign-in', init)
    expect(answer.status).toBe(413)
    expect(answer.text).toContain('This form is larger than the console takes (8192 bytes).')
    expect(answer.headers.get('set-cookie')).toBeNull()
    expect(read.pulled).toBe(false)
    // One just over the limit, sent whole, is refused too; a token's form is far below it.
    const over = await request('/console/sign-in', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
      body: new URLSearchParams({ token: 'x'.repeat(8 * 1024) }).toString(),
    })
    expect(over.status).toBe(413)
    expect((await signIn(ADMIN_TOKEN)).answer.status).toBe(303)
  })

  it("a signed-in form over 6 MiB is refused before its session's CSRF token is read from it", async () => {
    const { value } = await signIn(ADMIN_TOKEN)
    const { init, read } = claimedBody(10_000_000)
    const answer = await request('/console/dead-letters/bulk', {
      ...init,
      headers: { ...(init.headers as Record<string, string>), cookie: value },
    })
    expect(answer.status).toBe(413)
    expect(answer.text).toContain('(6291456 bytes)')
    expect(read.pulled).toBe(false)
  })
})
