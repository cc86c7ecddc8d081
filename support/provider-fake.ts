import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'svix'
import { resendContract } from './resend-contract.ts'
import { resendIdempotency } from './resend-idempotency.ts'
import { RESEND_DEFAULT_REQUESTS_PER_SECOND, resendRateLimiter } from './resend-rate.ts'

/** What the fake provider saw; the chaos run reports it and fails on the counts that mean a broken guarantee. */
export type ProviderStats = {
  /** Every request (POST /emails and /emails/batch). */
  requests: number
  /** Of those, `POST /emails/batch`. */
  batchRequests: number
  /** Answered 503 before anything was accepted (the key stays free, as Resend keeps no failed request). */
  transientFailures: number
  /** Sends held for the slow phase. */
  slowSends: number
  /** Repeats of an accepted key with the same payload: answered with the first answer, no new email. */
  replays: number
  /** Emails accepted after their client had already given up (a timeout): the answer never arrived. */
  answersLost: number
  /** Of those, how many were asked again and got their first answer (the retry that resolves a lost answer). */
  lostAnswersReplayed: number
  /** A second request for a key whose first one was still running and its client still waiting: two senders at once. */
  concurrentSenders: number
  /** A second request for a key whose first one was still running after its client gave up: answered 409, safe. */
  concurrentAfterTimeout: number
  /** A key repeated with a different payload: answered 409 invalid_idempotent_request. */
  otherPayload: number
  /**
   * Of the 409s, a batch's key repeated with fewer of its emails (members that went their own way
   * since, an erasure): the way the Worker learns that the first request went out, not a repeat
   * with another payload.
   */
  reducedRepeats: number
  /** Batch requests accepted and then answered 502, as a proxy that lost the answer does. */
  batchAnswersLost: number
  /** Batch requests refused 503 before anything was accepted, by `failBatches`. */
  batchesFailed: number
  /** Refused for a missing `User-Agent` (403, error 1010), as Resend does. */
  missingUserAgent: number
  /** Refused for the API key: missing (401) or not the one the fake knows, or revoked for a phase (403). */
  refusedForKey: number
  /** Refused 429 `daily_quota_exceeded` while the team's daily quota is used up (`setQuotaExceeded`). */
  refusedForQuota: number
  /** Answered 500 `internal_server_error` while Resend is down (`setOutage`), nothing accepted. */
  outageFailures: number
  /** Answered 429 `rate_limit_exceeded` with a `retry-after` (drawn, or past the team's rate). */
  rateLimited: number
  /** Of those, refused for the team's rate (requests per second). */
  overRate: number
  /** Delivery webhooks (`email.sent`, `email.delivered`) the Worker accepted. */
  webhooksDelivered: number
  /** Requests for a key before the time a 429 gave it: a retry the Worker should not have made yet. */
  earlyRetries: number
  /** Requests Resend's published OpenAPI document does not allow: answered 422 `validation_error`. */
  contractViolations: number
}

/**
 * One email the provider accepted: keyed by its Idempotency-Key, a batch's members by `key#index`;
 * `text` is its plain-text body (what the chaos run reads to tell which events a digest carried).
 */
export type AcceptedEmail = { to: string; payloadSha256: string; id: string; text: string; at: number }

/**
 * A stand-in for Resend's `POST /emails` and `POST /emails/batch`, for the
 * chaos run and `npm start -- --resend` (an email provider's API cannot run
 * here). It keeps Resend's documented idempotency rules, because they are
 * what makes a retry after a lost answer safe: the same Idempotency-Key with
 * the same payload within 24 hours returns the first answer and sends
 * nothing (after that it sends again); with another
 * payload it is refused (409 `invalid_idempotent_request`); while the first
 * request with that key is still running it is refused (409
 * `concurrent_idempotent_requests`). Like Resend
 * (https://resend.com/docs/api-reference/introduction, /errors) it refuses a
 * request without `User-Agent` (403, error 1010), without its key (401
 * `missing_api_key`) or with another (403 `invalid_api_key`) or that its
 * published OpenAPI document does not allow (422), and a phase can revoke the
 * key (403 `invalid_api_key`), use up the daily quota (429
 * `daily_quota_exceeded`) or take Resend down (500 `internal_server_error`
 * for every request) — the faults a Worker with two transports fails over on
 * (EMAIL_TRANSPORTS). It keeps Resend's rate limit per team (support/resend-rate.ts: 5
 * requests per second unless raised), with the `ratelimit-*` headers on every
 * answer. A share of requests fail with 503 before anything is accepted,
 * another share answer 429 `rate_limit_exceeded` with a `retry-after` (a
 * request for that key before then is counted as an early retry), and a slow
 * phase holds each send for a while (a pattern of durations, in turn). Given
 * a webhook, it posts each accepted email's `email.sent` and `email.delivered`
 * events there, signed as Resend signs them (Svix), and tries each again
 * until it is accepted, as Resend does.
 */
export async function startProviderFake(options: {
  failureRate: number
  apiKey: string
  rateLimitRate?: number
  retryAfterSeconds?: number
  /** The team's rate limit; Resend's documented default when not given. */
  requestsPerSecond?: number
  /** Where accepted emails' delivery events go, and the `whsec_…` secret they are signed with. */
  webhook?: { url: string; secret: string }
}) {
  const emails = new Map<string, AcceptedEmail>()
  /** When each request arrived (epoch ms), in order: the bench reads the pace from them. */
  const arrivals: number[] = []
  const running = new Map<string, { clientGone: boolean }>()
  const stats: ProviderStats = {
    requests: 0,
    batchRequests: 0,
    transientFailures: 0,
    slowSends: 0,
    replays: 0,
    answersLost: 0,
    lostAnswersReplayed: 0,
    concurrentSenders: 0,
    concurrentAfterTimeout: 0,
    otherPayload: 0,
    reducedRepeats: 0,
    batchAnswersLost: 0,
    batchesFailed: 0,
    missingUserAgent: 0,
    refusedForKey: 0,
    refusedForQuota: 0,
    outageFailures: 0,
    rateLimited: 0,
    overRate: 0,
    webhooksDelivered: 0,
    earlyRetries: 0,
    contractViolations: 0,
  }
  const contract = resendContract(
    JSON.parse(readFileSync(new URL('../test/fixtures/resend-openapi/resend.json', import.meta.url), 'utf8')),
  )
  const limiter = resendRateLimiter({
    requestsPerSecond: options.requestsPerSecond ?? RESEND_DEFAULT_REQUESTS_PER_SECOND,
  })
  // Resend's idempotency rules, its 24-hour window among them (./resend-idempotency.ts), over the payload's sha256.
  const keys = resendIdempotency<unknown>()
  /** The emails of each accepted batch, each as its JSON: a repeat with a subset of them is a reduced batch. */
  const batchEmails = new Map<string, Set<string>>()
  let loseBatchAnswers = 0
  let failNextBatches = 0
  const lostAnswers = new Set<string>()
  const notBefore = new Map<string, number>()
  let slowPattern: readonly number[] = []
  let keyRevoked = false
  let quotaExceeded = false
  let down = false
  let webhook = options.webhook

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    // The rate counts a request when it arrives, before its body (a batch's hundred emails) is read and
    // before anything else is checked: in arrival order, a request refused for another reason too.
    arrivals.push(Date.now())
    const rate = limiter.take('chaos')
    const raw = await readBody(request)
    stats.requests += 1
    const key = request.headers['idempotency-key']
    const batch = request.url === '/emails/batch'
    if (batch) stats.batchRequests += 1
    if (request.method !== 'POST' || (request.url !== '/emails' && !batch) || typeof key !== 'string' || key === '') {
      answer(response, 400, { name: 'validation_error', message: 'POST /emails with an Idempotency-Key' })
      return
    }
    if (down) {
      // Resend down: "5xx — Indicates an error with Resend servers" (/api-reference/introduction); the
      // error reference names it `internal_server_error`, 500 (https://resend.com/docs/api-reference/errors).
      // Nothing is taken: the key stays free, as for the drawn 503s below.
      stats.outageFailures += 1
      answer(response, 500, { name: 'internal_server_error', message: 'An unexpected error occurred.' })
      return
    }
    if (!request.headers['user-agent']) {
      stats.missingUserAgent += 1
      response.writeHead(403, { 'content-type': 'text/plain' }).end('error code: 1010')
      return
    }
    const authorization = request.headers.authorization
    if (!authorization || authorization !== `Bearer ${options.apiKey}` || keyRevoked) {
      stats.refusedForKey += 1
      if (!authorization) answer(response, 401, { name: 'missing_api_key', message: 'Missing API key' })
      else answer(response, 403, { name: 'invalid_api_key', message: 'API key is invalid' })
      return
    }
    if (!rate.allowed) {
      stats.rateLimited += 1
      stats.overRate += 1
      notBefore.set(key, Date.now() + Number(rate.headers['retry-after']) * 1000)
      answer(response, 429, { name: 'rate_limit_exceeded', message: 'Too many requests' }, rate.headers)
      return
    }
    const problems = contract.check({
      method: request.method ?? '',
      path: request.url ?? '',
      headers: request.headers as Record<string, string | undefined>,
      body: raw.toString('utf8'),
    })
    if (problems.length > 0) {
      stats.contractViolations += 1
      answer(response, 422, { name: 'validation_error', message: problems.join('; ') }, rate.headers)
      return
    }
    const waitUntil = notBefore.get(key)
    if (waitUntil !== undefined && Date.now() < waitUntil) stats.earlyRetries += 1
    notBefore.delete(key)
    const payloadSha256 = createHash('sha256').update(raw).digest('hex')
    const done = keys.decide(key, payloadSha256)
    if (done.kind === 'replay' || done.kind === 'other-payload') {
      if (done.kind === 'other-payload' && batch && isSubset(raw, batchEmails.get(key))) {
        stats.reducedRepeats += 1
        if (lostAnswers.delete(key)) stats.lostAnswersReplayed += 1
        answer(
          response,
          409,
          { name: 'invalid_idempotent_request', message: 'key used with another payload' },
          rate.headers,
        )
      } else if (done.kind === 'other-payload') {
        stats.otherPayload += 1
        answer(
          response,
          409,
          { name: 'invalid_idempotent_request', message: 'key used with another payload' },
          rate.headers,
        )
      } else {
        stats.replays += 1
        if (lostAnswers.delete(key)) stats.lostAnswersReplayed += 1
        answer(response, 200, done.answer, rate.headers)
      }
      return
    }
    if (quotaExceeded) {
      // https://resend.com/docs/api-reference/errors: `daily_quota_exceeded`, 429, "You have reached your
      // daily email sending quota"; the suggested action is to wait until 24 hours have passed, and the
      // page names no retry-after for it. A repeat of a key already taken is answered above (no new email).
      stats.refusedForQuota += 1
      answer(
        response,
        429,
        { name: 'daily_quota_exceeded', message: 'You have reached your daily email sending quota.' },
        rate.headers,
      )
      return
    }
    const first = running.get(key)
    if (first) {
      if (first.clientGone) stats.concurrentAfterTimeout += 1
      else stats.concurrentSenders += 1
      answer(
        response,
        409,
        { name: 'concurrent_idempotent_requests', message: 'a request with this key is running' },
        rate.headers,
      )
      return
    }
    if (batch && failNextBatches > 0) {
      failNextBatches -= 1
      stats.batchesFailed += 1
      answer(response, 503, { name: 'internal_server_error', message: 'try again' })
      return
    }
    const draw = Math.random()
    if (draw < options.failureRate) {
      stats.transientFailures += 1
      answer(response, 503, { name: 'internal_server_error', message: 'try again' })
      return
    }
    if (draw < options.failureRate + (options.rateLimitRate ?? 0)) {
      const seconds = options.retryAfterSeconds ?? 3
      stats.rateLimited += 1
      notBefore.set(key, Date.now() + seconds * 1000)
      answer(
        response,
        429,
        { name: 'rate_limit_exceeded', message: 'Too many requests' },
        { ...rate.headers, 'retry-after': String(seconds) },
      )
      return
    }
    const flight = { clientGone: false }
    running.set(key, flight)
    response.once('close', () => {
      if (!response.writableFinished) flight.clientGone = true
    })
    if (slowPattern.length > 0) {
      const ms = slowPattern[stats.slowSends % slowPattern.length] as number
      stats.slowSends += 1
      await new Promise((resolve) => setTimeout(resolve, ms))
    }
    running.delete(key)
    const parsed = JSON.parse(raw.toString()) as SentEmail | SentEmail[]
    const members = Array.isArray(parsed) ? parsed : [parsed]
    const ids = members.map((email, index) => {
      const id = batch ? `fake_${key}_${index}` : `fake_${key}`
      emails.set(batch ? `${key}#${index}` : key, {
        to: email.to[0] as string,
        payloadSha256,
        id,
        text: email.text ?? '',
        at: Date.now(),
      })
      return id
    })
    const body = batch ? { data: ids.map((id) => ({ id })) } : { id: ids[0] }
    keys.accept(key, payloadSha256, body)
    if (batch) batchEmails.set(key, new Set(members.map((email) => JSON.stringify(email))))
    if (batch && loseBatchAnswers > 0) {
      // Taken, and the answer lost on its way back (a proxy's 502).
      loseBatchAnswers -= 1
      stats.batchAnswersLost += 1
      stats.answersLost += 1
      lostAnswers.add(key)
      answer(response, 502, { name: 'bad_gateway', message: 'upstream answer lost' })
    } else {
      if (flight.clientGone) {
        stats.answersLost += 1
        lostAnswers.add(key)
      }
      answer(response, 200, body, rate.headers)
    }
    if (webhook) {
      for (const [index, email] of members.entries()) void deliverEvents(webhook, ids[index] as string, email)
    }
  }

  /** Posts `email.sent`, then `email.delivered`, for one accepted email, each until the Worker takes it. */
  async function deliverEvents(webhook: { url: string; secret: string }, id: string, email: SentEmail) {
    const signer = new Webhook(webhook.secret)
    for (const type of ['email.sent', 'email.delivered']) {
      // The shape of Resend's OutboundEmailEventData (its OpenAPI document, `EmailDeliveredEvent`).
      const payload = JSON.stringify({
        type,
        created_at: new Date().toISOString(),
        data: {
          email_id: id,
          created_at: new Date().toISOString(),
          from: email.from,
          to: email.to,
          subject: email.subject,
          // "Custom headers included with the email" (OutboundEmailEventData), ours among them.
          ...(email.headers
            ? { headers: Object.entries(email.headers).map(([name, value]) => ({ name, value })) }
            : {}),
        },
      })
      const svixId = `msg_${createHash('sha256').update(`${id}/${type}`).digest('hex').slice(0, 24)}`
      for (let attempt = 0; attempt < 30; attempt += 1) {
        const at = new Date()
        const accepted = await fetch(webhook.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'svix-id': svixId,
            'svix-timestamp': String(Math.floor(at.getTime() / 1000)),
            'svix-signature': signer.sign(svixId, at, payload),
          },
          body: payload,
        }).then(
          (answer) => answer.ok,
          () => false,
        )
        if (accepted) {
          stats.webhooksDelivered += 1
          break
        }
        await new Promise((resolve) => setTimeout(resolve, 1000 * 2 ** Math.min(attempt, 4)))
      }
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: Error) => answer(response, 500, { message: error.message }))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** Emails accepted, by Idempotency-Key: one per key, however often it was sent. */
    emails: emails as ReadonlyMap<string, AcceptedEmail>,
    stats: stats as Readonly<ProviderStats>,
    arrivals: arrivals as readonly number[],
    /** Revokes the API key (every request answered 403 invalid_api_key) or restores it. */
    setKeyRevoked(revoked: boolean) {
      keyRevoked = revoked
    },
    /** Uses up the team's daily quota (every new email answered 429 daily_quota_exceeded) or restores it. */
    setQuotaExceeded(exceeded: boolean) {
      quotaExceeded = exceeded
    },
    /** Takes Resend down (every request answered 500 internal_server_error, nothing taken) or brings it back. */
    setOutage(outage: boolean) {
      down = outage
    },
    /** Where delivery events go from now on (a Worker started after the fake, whose URL it did not know). */
    setWebhook(to: { url: string; secret: string }) {
      webhook = to
    },
    /** Accepts the next `count` batch requests and answers each 502: their answers are lost. */
    loseBatchAnswers(count: number) {
      loseBatchAnswers = count
    },
    /** Refuses the next `count` batch requests 503, accepting nothing. */
    failBatches(count: number) {
      failNextBatches = count
    },
    /** Holds the sends from now on for these durations in turn, in ms (none: fast again). */
    setSlow(pattern: readonly number[]) {
      slowPattern = pattern
    },
    close: () => server.close(),
  }
}

type SentEmail = { from: string; to: string[]; subject: string; text?: string; headers?: Record<string, string> }

/** Whether a batch request's emails are all among those of the batch first taken under its key. */
function isSubset(raw: Buffer, first: ReadonlySet<string> | undefined): boolean {
  if (!first) return false
  const emails = JSON.parse(raw.toString()) as unknown[]
  return emails.length > 0 && emails.every((email) => first.has(JSON.stringify(email)))
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

function answer(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (response.destroyed) return
  response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body))
}
