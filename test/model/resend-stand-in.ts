import { type ResendDocument, resendContract } from '../../support/resend-contract.ts'
import { resendIdempotency } from '../../support/resend-idempotency.ts'
import doc from '../fixtures/resend-openapi/resend.json'
import type { ProviderAnswer } from './binding-stand-in.ts'

/**
 * Resend's `POST /emails` and `POST /emails/batch` as the lifecycle model
 * scripts them, on the model's clock, inside the isolate (the Worker's
 * `fetch` of the stand-in's origin reaches it). It keeps what Resend
 * documents and the model's invariants depend on:
 *
 * - a request Resend's OpenAPI document does not allow is refused (422), as
 *   the test fake does (support/resend-contract.ts);
 * - a batch is accepted or refused whole
 *   (https://resend.com/docs/api-reference/emails/send-batch-emails);
 * - idempotency keys as support/resend-idempotency.ts keeps them: the first
 *   answer within 24 h (`windowMs`), 409 `invalid_idempotent_request` for
 *   another payload, and a key forgotten after the window — a request past
 *   it sends again;
 * - a revoked key is refused, 403 `invalid_api_key`, a quota 429
 *   `daily_quota_exceeded` with `retry-after`, the rate 429
 *   `rate_limit_exceeded` with `retry-after`
 *   (https://resend.com/docs/api-reference/errors), and a refusal sends
 *   nothing and keeps no key.
 *
 * Faults the model injects: the next requests' answers (`script`) — lost
 * after the emails were accepted (a timeout, a proxy's 502), a 5xx before
 * anything was accepted, a 422, a 429 — and lasting states (`revoked`,
 * `quota`, `down`: an outage, every request answered 503 or not at all,
 * nothing accepted). Every accepted email is kept with the model time it was
 * accepted at, its recipient and the notification it carries.
 */

/** One email Resend accepted. */
export type ResendEmail = {
  id: string
  key: string
  notificationId: string
  to: string
  at: number
  headers: Record<string, string>
}

/** What the next request is answered, in place of the normal answer. */
export type ResendFault =
  | 'lose-after-accept'
  | 'fail-5xx'
  | 'refuse-422'
  | 'rate-limit'
  | 'quota'
  | 'revoked'
  | 'wrong-url-404'

type Answer = { status: number; body: unknown }

export const MODEL_RESEND_URL = 'https://resend.model.test'

export class ResendStandIn {
  readonly apiKey: string
  readonly emails: ResendEmail[] = []
  /** Requests received, by idempotency key. */
  readonly requests = new Map<string, number>()
  /** One-shot faults for the next requests, in order. */
  readonly script: ResendFault[] = []
  /** Lasting states: the key revoked, the quota spent, the API down. */
  revoked = false
  quota = false
  down = false
  #downAnswers = 0
  /** Seconds a 429 asks to wait. */
  retryAfterSeconds = 60
  /**
   * Told of the emails of each request it accepts (not of a replay, which
   * sends nothing), before the answer goes back: the moment they went out.
   */
  onAccept: ((emails: ResendEmail[]) => Promise<void>) | undefined
  /**
   * Runs when a request arrives, before it is answered, with the
   * notifications it carries: what happens while their send is in flight.
   */
  onRequest: ((notificationIds: string[]) => Promise<void>) | undefined
  /** Told how each request was answered, with the notifications it carried. */
  onAnswer: ((notificationIds: string[], answer: ProviderAnswer) => void) | undefined
  readonly #keys: ReturnType<typeof resendIdempotency<Answer>>
  readonly #contract = resendContract(doc as unknown as ResendDocument)

  constructor(apiKey: string, options: { windowMs?: number } = {}) {
    this.apiKey = apiKey
    this.#keys = resendIdempotency<Answer>({ now: () => Date.now(), ...options })
  }

  /** The emails accepted for one notification. */
  emailsOf(notificationId: string): ResendEmail[] {
    return this.emails.filter((email) => email.notificationId === notificationId)
  }

  async fetch(request: Request): Promise<Response> {
    const ids = carried(await request.clone().text())
    if (this.onRequest) await this.onRequest(ids)
    let response: Response
    try {
      response = await this.#answer(request)
    } catch (error) {
      this.onAnswer?.(ids, 'maybe')
      throw error
    }
    // A 4xx but the two idempotency conflicts refuses the request itself; a 409 says a request under the key was taken.
    const refused = response.status >= 400 && response.status < 500 && response.status !== 409
    this.onAnswer?.(ids, response.ok ? 'accepted' : refused ? 'refused' : 'maybe')
    return response
  }

  async #answer(request: Request): Promise<Response> {
    const url = new URL(request.url)
    const route = `${request.method} ${url.pathname}`
    const fault = this.script.shift()
    if (route !== 'POST /emails' && route !== 'POST /emails/batch') return refusal(404, 'not_found', 'no such route')
    if (fault === 'wrong-url-404') return refusal(404, 'not_found', 'no such route')
    const payload = await request.text()
    const key = request.headers.get('idempotency-key') ?? ''
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1)
    if (request.headers.get('authorization') !== `Bearer ${this.apiKey}` || this.revoked || fault === 'revoked') {
      return refusal(403, 'invalid_api_key', 'API key is invalid.')
    }
    if (this.quota || fault === 'quota') {
      return refusal(429, 'daily_quota_exceeded', 'You have reached your daily email sending quota.', {
        'retry-after': String(this.retryAfterSeconds),
      })
    }
    if (fault === 'rate-limit') {
      return refusal(429, 'rate_limit_exceeded', 'Too many requests.', {
        'retry-after': String(this.retryAfterSeconds),
      })
    }
    if (this.down) {
      // An outage: nothing accepted, answered 503 or not at all.
      this.#downAnswers += 1
      if (this.#downAnswers % 2 === 0) throw new TypeError('Network connection lost.')
      return refusal(503, 'internal_server_error', 'try again')
    }
    if (fault === 'fail-5xx') return refusal(503, 'internal_server_error', 'try again')
    const problems = this.#contract.check({
      method: request.method,
      path: url.pathname,
      headers: Object.fromEntries(request.headers),
      body: payload,
    })
    if (problems.length > 0) return refusal(422, 'validation_error', problems.join('; '))
    if (fault === 'refuse-422') return refusal(422, 'validation_error', 'Invalid `to` field.')
    const decision = this.#keys.decide(key, payload)
    if (decision.kind === 'other-payload') {
      return refusal(409, 'invalid_idempotent_request', 'Same idempotency key used with a different request payload.')
    }
    if (decision.kind === 'running') {
      return refusal(409, 'concurrent_idempotent_requests', 'Same idempotency key used while a request is running.')
    }
    const before = this.emails.length
    const answer = decision.kind === 'replay' ? decision.answer : this.#accept(key, payload, route === 'POST /emails')
    if (this.emails.length > before) await this.onAccept?.(this.emails.slice(before))
    // Lost on the way back: the emails were taken, the client never hears it.
    if (fault === 'lose-after-accept') {
      if (this.emails.length % 2 === 0) throw new TypeError('Network connection lost.')
      return new Response('<html>502 Bad Gateway</html>', { status: 502, headers: { 'content-type': 'text/html' } })
    }
    return Response.json(answer.body, { status: answer.status })
  }

  #accept(key: string, payload: string, single: boolean): Answer {
    const parsed = JSON.parse(payload) as SentEmail | SentEmail[]
    const list = Array.isArray(parsed) ? parsed : [parsed]
    const ids = list.map((email) => {
      const id = crypto.randomUUID()
      const headers = email.headers ?? {}
      this.emails.push({
        id,
        key,
        notificationId: headers['X-Notify-Edge-Notification'] ?? '',
        to: email.to[0] ?? '',
        at: Date.now(),
        headers,
      })
      return id
    })
    const answer: Answer = { status: 200, body: single ? { id: ids[0] } : { data: ids.map((id) => ({ id })) } }
    this.#keys.accept(key, payload, answer)
    return answer
  }
}

type SentEmail = { to: string[]; headers?: Record<string, string> }

/** The notifications a request's emails carry (their header), or none when it is not JSON. */
function carried(payload: string): string[] {
  try {
    const parsed = JSON.parse(payload) as SentEmail | SentEmail[]
    return (Array.isArray(parsed) ? parsed : [parsed]).flatMap(
      (email) => email.headers?.['X-Notify-Edge-Notification'] ?? [],
    )
  } catch {
    return []
  }
}

function refusal(status: number, name: string, message: string, headers: Record<string, string> = {}): Response {
  return Response.json({ statusCode: status, message, name }, { status, headers })
}
