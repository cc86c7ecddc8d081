/**
 * Guessing a token is not free: past 10 failed attempts a minute from one
 * client — unknown bearer tokens on the API, wrong tokens on the console's
 * sign-in form — the client is answered 429 with Retry-After for the rest of
 * the minute, whatever it sends, a right token included; another client is
 * not. Each failure is counted in /metrics, a throttled client once: a flood
 * of wrong tokens is not a flood of writes. (Cloudflare's Rate Limiting
 * binding, AUTH_FAILURES, as wrangler.toml declares it, inside workerd.)
 */
import { createExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import { ADMIN_TOKEN } from './helpers.ts'

/** A client of its own for each test: the limiter's counts outlive a test. */
const clientFor = () => `203.0.113.${Math.floor(Math.random() * 250) + 1}`

async function call(path: string, client: string, init: RequestInit = {}) {
  const headers = new Headers(init.headers)
  headers.set('cf-connecting-ip', client)
  const response = await worker.fetch(
    new Request(`http://worker${path}`, { redirect: 'manual', ...init, headers }),
    env,
    createExecutionContext(),
  )
  return { status: response.status, headers: response.headers, text: await response.text() }
}

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } })

const signIn = (client: string, token: string) =>
  call('/console/sign-in', client, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
    body: new URLSearchParams({ token }).toString(),
  })

async function failures(surface: string, outcome: string): Promise<number> {
  const row = await env.DB.prepare(
    "SELECT value FROM counters WHERE name = 'notify_auth_failures_total' AND labels = ?1",
  )
    .bind(JSON.stringify({ outcome, surface }))
    .first<{ value: number }>()
  return row?.value ?? 0
}

describe('failed attempts to authenticate', () => {
  it('on the API: the 11th unknown token in a minute is a 429, and so is the right token after it; another client is let in', async () => {
    const client = clientFor()
    const refusedBefore = await failures('api', 'refused')
    const throttledBefore = await failures('api', 'throttled')
    for (let attempt = 1; attempt <= 10; attempt += 1) {
      expect((await call('/v1/dead-letters', client, bearer(`guess-${attempt}-0123456789abcdef`))).status).toBe(401)
    }
    const eleventh = await call('/v1/dead-letters', client, bearer('guess-11-0123456789abcdef'))
    expect(eleventh.status).toBe(429)
    expect(JSON.parse(eleventh.text).error.code).toBe('TOO_MANY_ATTEMPTS')
    const wait = Number(eleventh.headers.get('retry-after'))
    expect(wait).toBeGreaterThan(0)
    expect(wait).toBeLessThanOrEqual(60)
    // Refused whatever it sends now: a right guess is not told apart from a wrong one.
    expect((await call('/v1/dead-letters', client, bearer(ADMIN_TOKEN))).status).toBe(429)
    // Twenty more wrong ones: still 429, and counted as one throttling.
    for (let attempt = 0; attempt < 20; attempt += 1) {
      expect((await call('/v1/dead-letters', client, bearer(`more-${attempt}-0123456789abcdef`))).status).toBe(429)
    }
    expect(
      (await call('/v1/dead-letters', clientFor().replace('203.0.113', '198.51.100'), bearer(ADMIN_TOKEN))).status,
    ).toBe(200)
    expect((await failures('api', 'refused')) - refusedBefore).toBe(10)
    expect((await failures('api', 'throttled')) - throttledBefore).toBe(1)
    // The ingest route counts apart: an operator's wrong tokens do not hold back a bridge behind the
    // same address. Its own wrong tokens are throttled the same way.
    const ingest = (token: string) => call('/v1/ingest', client, { method: 'POST', ...bearer(token) })
    for (let attempt = 1; attempt <= 10; attempt += 1) {
      expect((await ingest(`ingest-guess-${attempt}-0123456789abcdef`)).status).toBe(401)
    }
    expect((await ingest('ingest-guess-11-0123456789abcdef')).status).toBe(429)
  })

  it('on the console: the 11th wrong sign-in in a minute is a 429 page with Retry-After, the right token too; /metrics shows them', async () => {
    const client = clientFor().replace('203.0.113', '192.0.2')
    for (let attempt = 1; attempt <= 10; attempt += 1) {
      const wrong = await signIn(client, `wrong-${attempt}-0123456789abcdef`)
      expect(wrong.status).toBe(303)
      expect(wrong.headers.get('location')).toBe('/console/sign-in?failed=1')
    }
    const throttled = await signIn(client, 'wrong-11-0123456789abcdef')
    expect(throttled.status).toBe(429)
    expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(throttled.text).toContain('Too many wrong tokens from here: try again in')
    const right = await signIn(client, ADMIN_TOKEN)
    expect(right.status).toBe(429)
    expect(right.headers.get('set-cookie')).toBeNull()
    const elsewhere = await signIn(`${client.split('.').slice(0, 3).join('.')}.251`, ADMIN_TOKEN)
    expect(elsewhere.status).toBe(303)
    expect(elsewhere.headers.get('location')).toBe('/console')

    const metrics = await call('/metrics', '198.51.100.77', bearer(ADMIN_TOKEN))
    expect(metrics.text).toMatch(/^# TYPE notify_auth_failures_total counter$/m)
    expect(metrics.text).toMatch(/^notify_auth_failures_total\{surface="console",outcome="refused"\} [1-9]\d*$/m)
    expect(metrics.text).toMatch(/^notify_auth_failures_total\{surface="console",outcome="throttled"\} [1-9]\d*$/m)
  })
})
