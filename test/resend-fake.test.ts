/**
 * The Resend stand-in behaves as Resend documents it, and the resend transport
 * keeps to what that behaviour asks: the rate limit of
 * https://resend.com/docs/api-reference/rate-limit (5 requests per second per
 * team, the `ratelimit-*` headers on every answer, a 429 with `retry-after`
 * past it), `POST /emails/batch` as
 * https://resend.com/docs/api-reference/emails/send-batch-emails describes it,
 * and answers that match the response schemas of Resend's OpenAPI document.
 */
import type { Schema } from '@cfworker/json-schema'
import { afterEach, describe, expect, it } from 'vitest'
import { resendTransport } from '../src/dispatch/transports/resend.ts'
import { SendError } from '../src/dispatch/transports/types.ts'
import type { Mail } from '../src/mail/mime.ts'
import { schemaValidator } from '../support/openapi-check.ts'
import type { ResendDocument } from '../support/resend-contract.ts'
import { RESEND_DEFAULT_REQUESTS_PER_SECOND, resendRateLimiter } from '../support/resend-rate.ts'
import { FAKE_RESEND_URL } from './fake-resend.ts'
import doc from './fixtures/resend-openapi/resend.json'
import { guid } from './helpers.ts'

const document = doc as unknown as ResendDocument & {
  paths: Record<string, Record<string, { responses: Record<string, { content: Record<string, { schema: Schema }> }> }>>
}
const validate = schemaValidator(document.components)
const responseSchema = (path: string) =>
  document.paths[path]?.post?.responses['200']?.content['application/json']?.schema as Schema

function mail(to: string): Mail {
  return {
    notificationId: `ntf_${guid().replaceAll('-', '')}`,
    from: { address: 'notifications@notify-edge.example', name: 'ArtHunt' },
    to: { address: to, name: 'Анна' },
    subject: 'Новый отклик',
    text: 'Текст',
    html: '<p>Текст</p>',
    unsubscribeUrl: null,
  }
}

/** The body and headers the transport sends for a mail, to build requests it does not make yet (a batch). */
async function requestOf(m: Mail): Promise<{ headers: Record<string, string>; email: Record<string, unknown> }> {
  let seen: Request | undefined
  await resendTransport({ apiKey: 'test-resend-key', baseUrl: FAKE_RESEND_URL }, (async (input, init) => {
    seen = new Request(input as RequestInfo, init)
    return Response.json({ id: 'x' })
  }) as typeof fetch).send(m)
  const request = seen as Request
  return { headers: Object.fromEntries(request.headers), email: (await request.json()) as Record<string, unknown> }
}

async function sendError(promise: Promise<unknown>): Promise<SendError> {
  const error = await promise.then(
    () => undefined,
    (cause: unknown) => cause,
  )
  expect(error).toBeInstanceOf(SendError)
  return error as SendError
}

afterEach(async () => {
  await fetch(`${FAKE_RESEND_URL}/control/rate-clock`, { method: 'POST' })
})

describe("Resend's rate limit (5 requests per second per team)", () => {
  it('counts a window per team: five pass with the remaining count falling, the sixth waits for the reset', () => {
    let now = 1_000_000
    const limiter = resendRateLimiter({ now: () => now })
    const answers = Array.from({ length: 6 }, () => limiter.take('team-a'))
    expect(RESEND_DEFAULT_REQUESTS_PER_SECOND).toBe(5)
    expect(answers.map((a) => a.allowed)).toEqual([true, true, true, true, true, false])
    expect(answers.map((a) => a.headers['ratelimit-remaining'])).toEqual(['4', '3', '2', '1', '0', '0'])
    expect(answers[5]?.headers).toEqual({
      'ratelimit-limit': '5',
      'ratelimit-remaining': '0',
      'ratelimit-reset': '1',
      'retry-after': '1',
    })
    expect(answers[0]?.headers['retry-after']).toBeUndefined()
    // Another team has its own window; this one's opens again a second later.
    expect(limiter.take('team-b').allowed).toBe(true)
    now += 1000
    expect(limiter.take('team-a')).toMatchObject({ allowed: true, headers: { 'ratelimit-remaining': '4' } })
  })

  it('the window slides: no second, wherever it starts, holds more than five, and a refusal counts in it too', () => {
    let now = 1_000_000
    const limiter = resendRateLimiter({ now: () => now })
    expect(limiter.take('team-a').allowed).toBe(true)
    now += 900
    expect(Array.from({ length: 4 }, () => limiter.take('team-a').allowed)).toEqual([true, true, true, true])
    // A fixed window that opened at the first request would let five more in from 1,000 ms on: the second
    // before 1,050 still holds the four of 900.
    now += 150
    expect(limiter.take('team-a')).toMatchObject({ allowed: true, headers: { 'ratelimit-remaining': '0' } })
    const refused = limiter.take('team-a')
    expect(refused).toMatchObject({ allowed: false, headers: { 'retry-after': '1' } })
    // At 1,901 the four of 900 have left; the ones of 1,050, the refused one among them, have not.
    now += 851
    expect(limiter.take('team-a')).toMatchObject({ allowed: true, headers: { 'ratelimit-remaining': '2' } })
  })

  it('the transport sends five within the second; the sixth is a transient failure that waits as told', async () => {
    await fetch(`${FAKE_RESEND_URL}/control/rate-clock?at=${Date.now()}`, { method: 'POST' })
    const transport = resendTransport({ apiKey: 'test-resend-key-default-rate', baseUrl: FAKE_RESEND_URL })
    const sent: string[] = []
    for (let i = 0; i < 5; i += 1) sent.push((await transport.send(mail(`rate-${i}@example.com`))).providerId)
    expect(sent.every((id) => id.startsWith('re_ntf_'))).toBe(true)
    const refused = await sendError(transport.send(mail('rate-6@example.com')))
    expect(refused).toMatchObject({ outcome: 'transient', providerCode: 'rate_limit_exceeded', delaySeconds: 1 })
  })

  it('every answer carries the ratelimit headers, and a 429 retry-after', async () => {
    const { headers, email } = await requestOf(mail('headers@example.com'))
    const answer = await fetch(`${FAKE_RESEND_URL}/emails`, { method: 'POST', headers, body: JSON.stringify(email) })
    expect(answer.status).toBe(200)
    expect(answer.headers.get('ratelimit-limit')).toMatch(/^\d+$/)
    expect(answer.headers.get('ratelimit-remaining')).toMatch(/^\d+$/)
    expect(answer.headers.get('ratelimit-reset')).toMatch(/^\d+$/)
    expect(validate(responseSchema('/emails'), await answer.json()).valid).toBe(true)
  })

  it('a retry-after given as an HTTP date is waited for as well as one in seconds', async () => {
    const transport = resendTransport({ apiKey: 'test-resend-key', baseUrl: FAKE_RESEND_URL })
    const refused = await sendError(transport.send(mail(`retrydate-${guid().slice(0, 8)}@example.com`)))
    expect(refused.outcome).toBe('transient')
    // Two hours ahead, to the second the date can say.
    expect(refused.delaySeconds).toBeGreaterThan(7100)
    expect(refused.delaySeconds).toBeLessThanOrEqual(7200)
  })

  it('without retry-after, a 429 waits for ratelimit-reset', async () => {
    const transport = resendTransport({ apiKey: 'k', baseUrl: 'https://api.resend.com' }, (async () =>
      Response.json(
        { statusCode: 429, name: 'rate_limit_exceeded', message: 'Too many requests' },
        { status: 429, headers: { 'ratelimit-limit': '5', 'ratelimit-remaining': '0', 'ratelimit-reset': '4' } },
      )) as typeof fetch)
    expect(await sendError(transport.send(mail('reset@example.com')))).toMatchObject({
      outcome: 'transient',
      delaySeconds: 4,
    })
  })
})

describe('POST /emails/batch', () => {
  async function batch(emails: Record<string, unknown>[], key: string, headers?: Record<string, string>) {
    const base = (await requestOf(mail('batch@example.com'))).headers
    return fetch(`${FAKE_RESEND_URL}/emails/batch`, {
      method: 'POST',
      headers: { ...base, 'idempotency-key': key, ...headers },
      body: JSON.stringify(emails),
    })
  }

  it('takes up to 100 emails under one key, answers one id per email, and a repeat with the same payload sends none', async () => {
    const emails = [
      (await requestOf(mail('first@example.com'))).email,
      (await requestOf(mail('second@example.com'))).email,
    ]
    const key = `batch-${guid()}`
    const answer = await batch(emails, key)
    expect(answer.status).toBe(200)
    const body = (await answer.json()) as { data: { id: string }[] }
    expect(validate(responseSchema('/emails/batch'), body).valid).toBe(true)
    expect(body.data).toEqual([{ id: `re_${key}_0` }, { id: `re_${key}_1` }])
    const again = await batch(emails, key)
    expect(await again.json()).toEqual(body)
    const accepted = await fetch(`${FAKE_RESEND_URL}/control/emails?key=${key}`)
    expect(await accepted.json()).toEqual({ count: 2 })
    const other = await batch([emails[1] as Record<string, unknown>], key)
    expect(other.status).toBe(409)
    expect(await other.json()).toMatchObject({ name: 'invalid_idempotent_request' })
  })

  it('refuses what the reference refuses: more than 100, none, attachments or a scheduled time, no User-Agent', async () => {
    const { email } = await requestOf(mail('many@example.com'))
    for (const emails of [
      Array.from({ length: 101 }, () => email),
      [],
      [{ ...email, attachments: [{ filename: 'a.txt', content: 'YQ==' }] }],
      [{ ...email, scheduled_at: 'in 1 min' }],
    ]) {
      const answer = await batch(emails, `batch-${guid()}`)
      expect(answer.status).toBe(422)
      expect(await answer.json()).toMatchObject({ name: 'validation_error' })
    }
    const anonymous = await batch([email], `batch-${guid()}`, { 'user-agent': '' })
    expect(anonymous.status).toBe(403)
    expect(await anonymous.text()).toBe('error code: 1010')
  })
})
