import { RESEND_TIMEOUT_DEFAULT_SECONDS } from '../../config.ts'
import { buildMime, listHeadersOf, type Mail, messageIdOf } from '../../mail/mime.ts'
import { USER_AGENT } from '../../version.ts'
import type { PaceObserver } from '../pace/answer.ts'
import { SendError, type SendOutcome, type Transport } from './types.ts'

/**
 * Resend's HTTP API: one email per `POST /emails`, or up to 100 in one
 * `POST /emails/batch` (`sendBatch`). `Idempotency-Key` is the notification
 * id (a batch's: the batch id, its membership stored before the first
 * request), and the payload is built from the stored notifications alone, so a retry after a lost
 * answer (a timeout, a 5xx from a proxy) is the same request, and Resend
 * answers it with the first answer instead of sending again (within its 24 h
 * window). Every request names notify-edge in `User-Agent`, which Resend
 * requires. What a refusal means is `outcomeOf`'s table.
 *
 * Not the official `resend` SDK (read at 6.22.0): its request options take no
 * `signal`, so a send could not be bounded by our timeout; it turns every
 * thrown fetch error into one `application_error` without a status; and it
 * writes each error body to `console.error` unless `NODE_ENV` is
 * `production`, and Resend's error messages can quote the recipient's
 * address, which must not reach our logs. It does expose the idempotency key
 * and the answer's headers; the request itself is small, and is checked
 * against Resend's published OpenAPI document in the tests.
 *
 * With a `pace` (src/dispatch/pace/), each answer's rate headers are reported
 * to it before the send returns; the wait for a slot happens before the send,
 * in the dispatch consumer.
 */
export function resendTransport(
  options: {
    apiKey: string
    baseUrl: string
    pace?: PaceObserver | undefined
    /** Longest wait for Resend's answer before the attempt counts as a transient failure (RESEND_TIMEOUT_SECONDS). */
    timeoutSeconds?: number
  },
  fetcher: typeof fetch = fetch,
): Transport {
  const timeoutMs = (options.timeoutSeconds ?? RESEND_TIMEOUT_DEFAULT_SECONDS) * 1000
  /** One request; its answer's JSON when Resend accepted it, else the SendError of its refusal. */
  async function post(path: string, key: string, body: unknown): Promise<unknown> {
    let response: Response
    try {
      // Joined, not resolved: a base with a path (a proxy's prefix) keeps it.
      response = await fetcher(`${options.baseUrl.replace(/\/+$/, '')}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'idempotency-key': key,
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (cause) {
      // No answer: Resend may have taken it.
      throw new SendError(`resend: ${(cause as Error).message}`, 'transient', { cause, outage: true })
    }
    const text = await response.text()
    const failure = response.ok ? undefined : failureOf(response, text)
    // Every answer carries Resend's rate headers: the pace of every sender of this account learns from them.
    await options.pace?.observe({
      key,
      headers: response.headers,
      rateLimited: response.status === 429 && failure?.outcome === 'transient',
      waitSeconds: failure?.delaySeconds,
    })
    if (failure) throw failure
    try {
      return JSON.parse(text) as unknown
    } catch {
      return undefined
    }
  }
  return {
    name: 'resend',
    async send(mail) {
      const answer = (await post('/emails', mail.notificationId, emailOf(mail))) as { id?: unknown } | undefined
      const messageId = messageIdOf(mail)
      const id = answer?.id
      return { providerId: typeof id === 'string' ? id : messageId, raw: buildMime(mail), messageId }
    },
    async sendBatch(mails, key) {
      // https://resend.com/docs/api-reference/emails/send-batch-emails: up to 100 emails, one id per email, in order.
      const answer = (await post('/emails/batch', key, mails.map(emailOf))) as { data?: { id?: unknown }[] } | undefined
      return mails.map((mail, index) => {
        const messageId = messageIdOf(mail)
        const id = answer?.data?.[index]?.id
        return { providerId: typeof id === 'string' ? id : messageId, raw: buildMime(mail), messageId }
      })
    },
  }
}

/** One email as Resend's `POST /emails` (and each member of a batch) takes it. */
function emailOf(mail: Mail) {
  return {
    from: `${displayName(mail.from.name)} <${mail.from.address}>`,
    to: [mail.to.address],
    subject: mail.subject,
    text: mail.text,
    html: mail.html,
    headers: {
      'Message-ID': messageIdOf(mail),
      'X-Notify-Edge-Notification': mail.notificationId,
      ...listHeadersOf(mail),
    },
  }
}

/**
 * What a refusal of Resend means, by status and the error's `name`, as
 * Resend's error reference lists them (https://resend.com/docs/api-reference/errors):
 * - about us, so the transport pauses: 401 `missing_api_key` /
 *   `restricted_api_key`, 403 `invalid_api_key`, a domain not verified or
 *   "you can only send testing emails", and the missing `User-Agent` (1010);
 *   422 `invalid_from_address` (our sender); 429 `daily_quota_exceeded` /
 *   `monthly_quota_exceeded` (until the quota resets); 451 `security_error`;
 *   404 and 405 (no such route: `RESEND_API_URL` is wrong);
 * - transient: 429 `rate_limit_exceeded`, 409 `concurrent_idempotent_requests`
 *   (the first request with this key still runs), 5xx;
 * - permanent, about this message: other 400 and 422 (`validation_error`, an
 *   invalid recipient, a missing field), and 409 `invalid_idempotent_request`
 *   — Resend already accepted another payload under this notification's key
 *   (the template or the sender changed between attempts): that email most
 *   likely went out, and sending again would only be refused again.
 */
function outcomeOf(status: number, name: string): SendOutcome {
  if (status === 401 || status === 403 || status === 451) return 'paused'
  // No such route: RESEND_API_URL is wrong (a proxy's path dropped, a typo), so every send would fail.
  if (status === 404 || status === 405) return 'paused'
  if (status === 422 && name === 'invalid_from_address') return 'paused'
  if (status === 429) return /quota/.test(name) ? 'paused' : 'transient'
  if (status === 409) return name === 'invalid_idempotent_request' ? 'permanent' : 'transient'
  if (status >= 500) return 'transient'
  return 'permanent'
}

/**
 * Whether a refusal says for certain that nothing was sent under the request's
 * key: a 4xx is Resend refusing the request itself (an invalid payload, the
 * key, the rate limit), except the two idempotency conflicts, which say that
 * a request with this key was taken (or is still running). A 5xx, like no
 * answer at all, may come after the emails were taken.
 */
function nothingSent(status: number): boolean {
  return status >= 400 && status < 500 && status !== 409
}

/** The SendError of a refused request: its outcome, the provider's code, how long it asked us to wait. */
function failureOf(response: Response, text: string): SendError {
  let name = ''
  try {
    const parsed = JSON.parse(text) as { name?: unknown }
    if (typeof parsed.name === 'string') name = parsed.name
  } catch {
    // Not JSON (a proxy's page): the status alone decides.
  }
  const outcome = outcomeOf(response.status, name)
  const what =
    name === 'invalid_idempotent_request'
      ? 'resend already accepted another payload under this notification id (invalid_idempotent_request); not sent again'
      : `HTTP ${response.status} ${text.slice(0, 300)}`
  return new SendError(`resend: ${what}`, outcome, {
    delaySeconds: waitSeconds(response),
    providerCode: name || `http-${response.status}`,
    nothingSent: nothingSent(response.status),
    // A 5xx says Resend (or what stands before it) is failing, not that the request was wrong.
    outage: response.status >= 500,
  })
}

/**
 * How long Resend asked us to wait: `retry-after` (seconds, or an HTTP date as
 * RFC 9110 also allows), else on a 429 `ratelimit-reset` — "How many seconds
 * until the limits are reset" (https://resend.com/docs/api-reference/rate-limit),
 * which a proxy in between may leave while dropping `retry-after`.
 */
function waitSeconds(response: Response): number | undefined {
  const retryAfter = retryAfterSeconds(response.headers.get('retry-after'))
  if (retryAfter !== undefined || response.status !== 429) return retryAfter
  return retryAfterSeconds(response.headers.get('ratelimit-reset'))
}

/** A header's wait in seconds (a number of seconds or an HTTP date), when it holds one. */
function retryAfterSeconds(header: string | null): number | undefined {
  if (!header) return undefined
  const seconds = /^\d+$/.test(header.trim()) ? Number(header) : (Date.parse(header) - Date.now()) / 1000
  return Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds) : undefined
}

/**
 * The display name of `from` as RFC 5322 wants it in `Name <address>`: as is
 * when it is plain words, else a quoted string (a comma, a dot or an `@` in
 * "ArtHunt, Inc." would otherwise make the field malformed, which Resend
 * refuses as a validation error).
 */
function displayName(name: string): string {
  const clean = name.replace(/[\r\n]+/g, ' ').trim()
  if (/^[\p{L}\p{N} !#$%&'*+\-/=?^_`{|}~]*$/u.test(clean)) return clean
  return `"${clean.replace(/["\\]/g, '\\$&')}"`
}
