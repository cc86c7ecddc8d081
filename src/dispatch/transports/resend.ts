import { buildMime, listHeadersOf, messageIdOf } from '../mime.ts'
import { SendError, type Transport } from './types.ts'

/** Longest wait for the provider before the attempt counts as a transient failure. */
const TIMEOUT_MS = 15_000

/**
 * Resend's HTTP API. `Idempotency-Key` is the notification id and the
 * payload is built from the stored notification alone, so a retry after a lost
 * answer (a timeout, a 5xx from a proxy) is the same request, and Resend
 * answers it with the first answer instead of sending again (within its 24 h
 * window). 429, 5xx, 409 `concurrent_idempotent_requests` and network errors
 * are transient; other 4xx, and 409 `invalid_idempotent_request`, are
 * permanent.
 */
export function resendTransport(
  options: { apiKey: string; baseUrl: string },
  fetcher: typeof fetch = fetch,
): Transport {
  return {
    name: 'resend',
    async send(mail) {
      const messageId = messageIdOf(mail)
      const from = `${mail.from.name.replace(/[<>"]/g, '')} <${mail.from.address}>`
      let response: Response
      try {
        response = await fetcher(new URL('/emails', options.baseUrl), {
          method: 'POST',
          headers: {
            authorization: `Bearer ${options.apiKey}`,
            'content-type': 'application/json',
            'idempotency-key': mail.notificationId,
          },
          body: JSON.stringify({
            from,
            to: [mail.to.address],
            subject: mail.subject,
            text: mail.text,
            html: mail.html,
            headers: {
              'Message-ID': messageId,
              'X-Notify-Edge-Notification': mail.notificationId,
              ...listHeadersOf(mail),
            },
          }),
          signal: AbortSignal.timeout(TIMEOUT_MS),
        })
      } catch (cause) {
        throw new SendError(`resend: ${(cause as Error).message}`, 'transient', { cause })
      }
      const text = await response.text()
      if (!response.ok) throw failureOf(response, text)
      let id: unknown
      try {
        id = (JSON.parse(text) as { id?: unknown }).id
      } catch {
        id = undefined
      }
      return { providerId: typeof id === 'string' ? id : messageId, raw: buildMime(mail), messageId }
    },
  }
}

/**
 * The SendError of a refused request. A 409 `invalid_idempotent_request` means
 * Resend already accepted another payload under this notification's key (the
 * template or the sender changed between attempts): that email most likely went
 * out, and sending again would only be refused again, so it is permanent.
 */
function failureOf(response: Response, text: string): SendError {
  const reusedKey = response.status === 409 && text.includes('invalid_idempotent_request')
  const transient = !reusedKey && (response.status === 429 || response.status === 409 || response.status >= 500)
  const what = reusedKey
    ? 'resend already accepted another payload under this notification id (invalid_idempotent_request); not sent again'
    : `HTTP ${response.status} ${text.slice(0, 300)}`
  return new SendError(`resend: ${what}`, transient ? 'transient' : 'permanent', {
    delaySeconds: retryAfterSeconds(response.headers.get('retry-after')),
  })
}

/** `Retry-After` in seconds (a number of seconds or an HTTP date), when the provider sent one. */
function retryAfterSeconds(header: string | null): number | undefined {
  if (!header) return undefined
  const seconds = /^\d+$/.test(header.trim()) ? Number(header) : (Date.parse(header) - Date.now()) / 1000
  return Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds) : undefined
}
