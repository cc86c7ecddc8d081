import type { SendOutcome } from './types.ts'

/** What one error code of the Email Service send binding means for the notification. */
type Meaning = { outcome: SendOutcome; delaySeconds?: number }

/**
 * The error codes the `send_email` binding throws (`error.code`), as Cloudflare
 * documents them for the Email Service Workers API. The rate limit passes by
 * itself but not within the first retry delays, so it waits longer. What is
 * about our own configuration — the sender or its domain not verified or not
 * onboarded, the account's daily quota — pauses the transport instead of
 * failing notifications that could not have gone out. A recipient the
 * account may not send to yet (a new account sends to verified addresses
 * only) is about that recipient: its notification fails as a dead letter to
 * replay once the account may send to it.
 */
const CODES: Record<string, Meaning> = {
  E_RECIPIENT_SUPPRESSED: { outcome: 'suppressed' },
  E_RATE_LIMIT_EXCEEDED: { outcome: 'transient', delaySeconds: 60 },
  E_DAILY_LIMIT_EXCEEDED: { outcome: 'paused', delaySeconds: 3600 },
  // An internal error may come after the message was taken: not known, not sent again blindly.
  E_INTERNAL_SERVER_ERROR: { outcome: 'unknown' },
  E_DELIVERY_FAILED: { outcome: 'transient' },
  E_VALIDATION_ERROR: { outcome: 'permanent' },
  E_FIELD_MISSING: { outcome: 'permanent' },
  E_TOO_MANY_RECIPIENTS: { outcome: 'permanent' },
  E_TOO_MANY_ATTACHMENTS: { outcome: 'permanent' },
  E_SENDER_NOT_VERIFIED: { outcome: 'paused' },
  E_RECIPIENT_NOT_ALLOWED: { outcome: 'permanent' },
  E_SENDER_DOMAIN_NOT_AVAILABLE: { outcome: 'paused' },
  E_CONTENT_TOO_LARGE: { outcome: 'permanent' },
  E_HEADER_NOT_ALLOWED: { outcome: 'permanent' },
  E_HEADER_USE_API_FIELD: { outcome: 'permanent' },
  E_HEADER_VALUE_INVALID: { outcome: 'permanent' },
  E_HEADER_VALUE_TOO_LONG: { outcome: 'permanent' },
  E_HEADER_NAME_INVALID: { outcome: 'permanent' },
  E_HEADERS_TOO_LARGE: { outcome: 'permanent' },
  E_HEADERS_TOO_MANY: { outcome: 'permanent' },
}

// Only for errors without a code: the local binding (wrangler dev) throws plain errors such as
// "email to … not allowed". A code, when there is one, always decides.
const PERMANENT_TEXT =
  /not allowed|not verified|invalid (?:destination|recipient|sender|address)|no such user|rejected/i

/**
 * What an error of the binding means. By its `code` when it has one; an
 * unknown code is transient (retried, then dead-lettered for an operator), so
 * a code Cloudflare adds later never fails a notification for good unseen;
 * an error without a code (a lost connection) leaves the outcome unknown.
 */
export function meaningOf(error: unknown): Meaning & { code: string | undefined } {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code.length > 0) return { ...(CODES[code] ?? { outcome: 'transient' }), code }
  const message = (error as Error | null)?.message ?? String(error)
  // Without a code it is no documented refusal: a lost connection or a timeout, after which the
  // message may have been taken. Sending it again blindly could send it twice.
  return { outcome: PERMANENT_TEXT.test(message) ? 'permanent' : 'unknown', code: undefined }
}
