/**
 * A stand-in for Resend's HTTP API, for tests only (an email provider cannot
 * run here). Runs in Node as miniflare's outbound service. Like Resend
 * (https://resend.com/docs/api-reference/introduction and /errors), it refuses
 * a request without `User-Agent` (403, error 1010), without a key (401
 * `missing_api_key`) or with a key it does not know (403 `invalid_api_key`),
 * refuses (422 `validation_error`) a request its published OpenAPI document
 * does not allow (support/resend-contract.ts), and answers errors as
 * `{statusCode, message, name}`. `POST /emails` and `POST /emails/batch`
 * (up to 100 emails, answered `{data: [{id}, …]}`) are both served. Keys:
 * `test-resend-key` (full access) and `test-resend-sending-key` (sending
 * access only, which Resend answers with 401 `restricted_api_key` on
 * anything but sending), both of one team, and
 * `test-resend-key-default-rate` of another; every key
 * `test-resend-key-team-{name}` is a team of its own at Resend's default
 * rate, made on first use and on the real clock, so that a test of the send
 * pace has a team (and, keyed by it, a pace) that no other test touches.
 * Each team has Resend's rate limit (support/resend-rate.ts): past it a 429
 * `rate_limit_exceeded` with `retry-after`, and the `ratelimit-*` headers on
 * every answer. `GET /domains`
 * lists FAKE_RESEND_DOMAINS as Resend's API reference documents the list
 * (https://resend.com/docs/api-reference/domains/list-domains; the schema
 * ListDomainsResponse of its OpenAPI document). The recipient's (a batch: its
 * first member's; `permanent…` any member's) local part picks the answer: `transient…` → 503,
 * `ratelimited…` → 429 `rate_limit_exceeded` with `retry-after: 3600`,
 * `retrydate…` → the same with `retry-after` as an HTTP date two hours
 * ahead, `quota…` → 429
 * `daily_quota_exceeded` with `retry-after: 7200`, `unverified…` → 403
 * `validation_error` (the domain is not verified), `permanent…` → 422
 * `validation_error`, `slow…` → held until the test releases it,
 * `lostanswer…` → accepted, but the first answer is a 504 (lost on the way
 * back); anything else → 200 with id `re_{Idempotency-Key}` (a batch:
 * `re_{Idempotency-Key}_{index}`). Accepted emails
 * follow Resend's idempotency rules (support/resend-idempotency.ts): the same
 * key with the same payload within 24 hours gets the first answer and no new
 * email, with another payload a 409 `invalid_idempotent_request`; after 24
 * hours the key is forgotten and the email sent again. Requests and accepted emails are counted by
 * key (`GET /control/sends?key=`, `GET /control/emails?key=`,
 * `POST /control/release?key=`, `POST /control/rate-clock?at=`, and
 * `?key=&at=` for one team's clock), and so are
 * the requests refused 429 for their team's rate (`GET /control/rate-limited?key=`),
 * which are refused before they count as sends. `POST /control/outage?key=&on=1`
 * (`on=0` to end it) answers every request under that API key 503
 * `internal_server_error`, before anything is taken: an outage of Resend.
 */
import { readFile } from 'node:fs/promises'
import { type ResendDocument, resendContract } from '../support/resend-contract.ts'
import { resendIdempotency } from '../support/resend-idempotency.ts'
import { resendRateLimiter } from '../support/resend-rate.ts'

export const FAKE_RESEND_URL = 'http://fake-resend.test'

const requests = new Map<string, number>()
const rateLimited = new Map<string, number>()
/** `GET /domains` requests answered, by API key. */
const domainLists = new Map<string, number>()
/** Emails accepted, by key (what `/control/emails` counts), and the keys as Resend keeps them: 24 h. */
const accepted = new Map<string, { ids: string[] }>()
const keys = resendIdempotency<string[]>()
const released = new Map<string, () => void>()
/** API keys whose requests are answered 503 (`POST /control/outage?key=&on=1`). */
const outages = new Set<string>()
const releases = new Map<string, Promise<void>>()

function releaseOf(key: string): Promise<void> {
  let promise = releases.get(key)
  if (!promise) {
    promise = new Promise<void>((resolve) => released.set(key, resolve))
    releases.set(key, promise)
  }
  return promise
}

/** The full-access key and the sending-only key this fake knows. */
export const FAKE_RESEND_KEYS = { full: 'test-resend-key', sending: 'test-resend-sending-key' } as const

/** A key that starts so is a team of its own, at Resend's default rate. */
export const FAKE_RESEND_TEAM_KEY_PREFIX = 'test-resend-key-team-'

/** The domains of the fake's team, by their status. */
export const FAKE_RESEND_DOMAINS = {
  verified: 'verified.notify-edge-fake.dev',
  pending: 'pending.notify-edge-fake.dev',
} as const

/** The Cloudflare Access team of the tests, whose key set this fake serves too. */
export const FAKE_ACCESS_TEAM = 'test-team.cloudflareaccess.com'

export async function fakeResend(request: Request): Promise<Response> {
  const url = new URL(request.url)
  if (url.origin === `https://${FAKE_ACCESS_TEAM}` && url.pathname === '/cdn-cgi/access/certs') {
    const keys = JSON.parse(await readFile(new URL('./fixtures/access-keys.json', import.meta.url), 'utf8'))
    return Response.json({ keys: [keys.public] })
  }
  if (url.origin !== FAKE_RESEND_URL)
    return new Response(`unexpected outbound request to ${url.origin}`, { status: 599 })
  if (url.pathname.startsWith('/control/')) {
    const key = url.searchParams.get('key') ?? ''
    if (url.pathname === '/control/sends') return Response.json({ count: requests.get(key) ?? 0 })
    if (url.pathname === '/control/emails') return Response.json({ count: accepted.get(key)?.ids.length ?? 0 })
    if (url.pathname === '/control/rate-limited') return Response.json({ count: rateLimited.get(key) ?? 0 })
    if (url.pathname === '/control/domain-lists') return Response.json({ count: domainLists.get(key) ?? 0 })
    if (url.pathname === '/control/rate-clock') {
      // With a `key` (a team key of its own): that team's clock only, so that tests running meanwhile keep theirs.
      const at = url.searchParams.get('at')
      const held = at === null ? undefined : Number(at)
      if (url.searchParams.has('key')) {
        if (held === undefined) heldAtOfTeam.delete(key)
        else heldAtOfTeam.set(key, held)
      } else heldAt = held
      return Response.json({ heldAt: held ?? null })
    }
    if (url.pathname === '/control/outage') {
      // Every request under this API key is answered 503 while it lasts: Resend (or what stands before it) is down.
      if (url.searchParams.get('on') === '1') outages.add(key)
      else outages.delete(key)
      return Response.json({ outage: outages.has(key) })
    }
    if (url.pathname === '/control/release') {
      void releaseOf(key)
      released.get(key)?.()
      return Response.json({ released: key })
    }
    return new Response('not found', { status: 404 })
  }
  const route = `${request.method} ${url.pathname}`
  if (route !== 'POST /emails' && route !== 'POST /emails/batch' && route !== 'GET /domains')
    return new Response('not found', { status: 404 })
  // Cloudflare, in front of Resend, answers this one with its own page, not Resend's JSON.
  if (!request.headers.get('user-agent')) return new Response('error code: 1010', { status: 403 })
  const authorization = request.headers.get('authorization')
  if (!authorization) return refusal(401, 'missing_api_key', 'Missing API key in the authorization header.')
  const apiKey = authorization.replace(/^Bearer /, '')
  const team = teamOf(apiKey)
  if (!authorization.startsWith('Bearer ') || team === undefined)
    return refusal(403, 'invalid_api_key', 'API key is invalid.')
  // Down: Resend's 500-range answer (https://resend.com/docs/api-reference/errors), before anything is taken.
  if (outages.has(apiKey)) return refusal(503, 'internal_server_error', 'upstream unavailable')
  // Each team has a limiter of its own, so one window per limiter.
  const rate = team.take('team')
  if (!rate.allowed) {
    const refused = request.headers.get('idempotency-key') ?? ''
    rateLimited.set(refused, (rateLimited.get(refused) ?? 0) + 1)
    return refusal(429, 'rate_limit_exceeded', 'Too many requests.', rate.headers)
  }
  if (route === 'GET /domains') {
    domainLists.set(apiKey, (domainLists.get(apiKey) ?? 0) + 1)
    return listDomains(request, apiKey)
  }
  // Resend's own OpenAPI document decides what a request may be; what it refuses, this refuses.
  const payload = await request.text()
  const problems = (await contract()).check({
    method: request.method,
    path: url.pathname,
    headers: Object.fromEntries(request.headers),
    body: payload,
  })
  if (problems.length > 0) return refusal(422, 'validation_error', problems.join('; '), rate.headers)
  const parsed = JSON.parse(payload) as Email | Email[]
  const emails = Array.isArray(parsed) ? parsed : [parsed]
  // `from` is `address` or `Name <address>` (Resend's API reference), the name a word list or a quoted string.
  if (
    emails.some(
      (email) =>
        !/^(?:(?:[\p{L}\p{N} !#$%&'*+\-/=?^_`{|}~]+|"(?:[^"\\]|\\.)*") <[^<>\s]+@[^<>\s]+>|[^<>\s]+@[^<>\s]+)$/u.test(
          email.from ?? '',
        ),
    )
  )
    return refusal(422, 'validation_error', 'Invalid `from` field.', rate.headers)
  // A batch is answered as its first member's recipient asks: Resend validates a batch as a whole.
  const to = emails[0]?.to?.[0] ?? ''
  const key = request.headers.get('idempotency-key')
  if (key) requests.set(key, (requests.get(key) ?? 0) + 1)
  if (to.startsWith('slow') && key) await releaseOf(key)
  if (to.startsWith('transient')) return refusal(503, 'internal_server_error', 'upstream unavailable')
  if (to.startsWith('ratelimited'))
    return refusal(429, 'rate_limit_exceeded', 'Too many requests.', { ...rate.headers, 'retry-after': '3600' })
  if (to.startsWith('retrydate'))
    return refusal(429, 'rate_limit_exceeded', 'Too many requests.', {
      ...rate.headers,
      'retry-after': new Date(Date.now() + 7_200_000).toUTCString(),
    })
  if (to.startsWith('quota'))
    return refusal(429, 'daily_quota_exceeded', 'You have reached your daily email sending quota.', {
      ...rate.headers,
      'retry-after': '7200',
    })
  if (to.startsWith('unverified'))
    return refusal(403, 'validation_error', 'The notify-edge.example domain is not verified.', rate.headers)
  // Resend validates a batch as a whole: one invalid email refuses all of it.
  if (emails.some((email) => email.to?.[0]?.startsWith('permanent')))
    return refusal(422, 'validation_error', 'Invalid `to` field.', rate.headers)
  if (!key) return new Response('{"message":"missing idempotency key"}', { status: 400 })
  // Resend's idempotency rules, its 24-hour window among them (support/resend-idempotency.ts).
  const decision = keys.decide(key, payload)
  if (decision.kind === 'other-payload' || decision.kind === 'running')
    return refusal(409, 'invalid_idempotent_request', 'key used with another payload', rate.headers)
  const ids =
    decision.kind === 'replay'
      ? decision.answer
      : emails.map((_, index) => (Array.isArray(parsed) ? `re_${key}_${index}` : `re_${key}`))
  if (decision.kind === 'new') {
    keys.accept(key, payload, ids)
    accepted.set(key, { ids: [...(accepted.get(key)?.ids ?? []), ...ids] })
    if (to.startsWith('lostanswer')) return new Response('upstream timed out', { status: 504 })
  }
  const body = Array.isArray(parsed) ? { data: ids.map((id) => ({ id })) } : { id: ids[0] }
  return Response.json(body, { headers: rate.headers })
}

type Email = { to?: string[]; subject?: string; from?: string }

/**
 * The fake's teams, by API key, each with its rate limiter. The tests share
 * one team whose limit was raised (Resend raises it on request); a test of the
 * limit itself uses the team at Resend's documented default, whose clock it
 * can hold still (`POST /control/rate-clock?at=ms`, without `at`: real time
 * again), so that "six requests within one second" does not depend on how
 * fast this machine is.
 */
let heldAt: number | undefined
/** The held clocks of single teams (`POST /control/rate-clock?key=&at=`). */
const heldAtOfTeam = new Map<string, number>()
const SHARED_TEAM = resendRateLimiter({ requestsPerSecond: 10_000 })
const TEAM_OF_KEY: Record<string, ReturnType<typeof resendRateLimiter>> = {
  [FAKE_RESEND_KEYS.full]: SHARED_TEAM,
  [FAKE_RESEND_KEYS.sending]: SHARED_TEAM,
  'test-resend-key-default-rate': resendRateLimiter({ now: () => heldAt ?? Date.now() }),
}

/** A key's team: one of the above, or a team of its own for a `test-resend-key-team-…` key. */
function teamOf(apiKey: string): ReturnType<typeof resendRateLimiter> | undefined {
  if (apiKey.startsWith(FAKE_RESEND_TEAM_KEY_PREFIX))
    TEAM_OF_KEY[apiKey] ??= resendRateLimiter({ now: () => heldAtOfTeam.get(apiKey) ?? Date.now() })
  return TEAM_OF_KEY[apiKey]
}

/**
 * `GET /domains`: the team's domains, `{object: 'list', has_more, data}` with
 * each domain's id, name, status, created_at and region, as the list-domains
 * reference shows it. A sending-only key is refused as Resend's error
 * reference says (https://resend.com/docs/api-reference/errors):
 * 401 `restricted_api_key`.
 */
async function listDomains(request: Request, apiKey: string): Promise<Response> {
  const problems = (await contract()).check({
    method: 'GET',
    path: '/domains',
    headers: Object.fromEntries(request.headers),
    body: '',
  })
  if (problems.length > 0) return refusal(422, 'validation_error', problems.join('; '))
  if (apiKey === FAKE_RESEND_KEYS.sending) {
    return refusal(401, 'restricted_api_key', 'This API key is restricted to only send emails.')
  }
  const domain = (name: string, status: string, id: string) => ({
    id,
    name,
    status,
    created_at: '2026-01-05 10:00:00.000000+00',
    region: 'us-east-1',
    capabilities: { sending: 'enabled', receiving: 'disabled' },
  })
  return Response.json({
    object: 'list',
    has_more: false,
    data: [
      domain(FAKE_RESEND_DOMAINS.verified, 'verified', 'd91cd9bd-1176-453e-8fc1-35364d380206'),
      domain(FAKE_RESEND_DOMAINS.pending, 'pending', '0b9d6f3e-7c1a-4a6e-9d8e-2f6c5b4a3e21'),
    ],
  })
}

let checker: Promise<ReturnType<typeof resendContract>> | undefined
function contract() {
  checker ??= readFile(new URL('./fixtures/resend-openapi/resend.json', import.meta.url), 'utf8').then((text) =>
    resendContract(JSON.parse(text) as ResendDocument),
  )
  return checker
}

/** An error as Resend answers it: `{statusCode, message, name}` with the status. */
function refusal(status: number, name: string, message: string, headers: Record<string, string> = {}): Response {
  return Response.json({ statusCode: status, message, name }, { status, headers })
}
