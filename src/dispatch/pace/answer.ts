/**
 * What one answer of the provider says about the pace, read from the headers
 * Resend puts on every answer (https://resend.com/docs/api-reference/rate-limit):
 * `ratelimit-limit` (requests allowed in a window), `ratelimit-remaining`
 * (left in the current window), `ratelimit-reset` (seconds until the window
 * resets) and, on a 429, `retry-after` (seconds to wait before a follow-up
 * request).
 */

/** One answer, as the transport that received it hands it to the pace. */
export type RateAnswer = {
  headers: Headers
  /** A 429 for the team's rate (not a quota: a quota pauses the transport, src/dispatch/pause.ts). */
  rateLimited: boolean
  /** How long the provider asked us to wait, in seconds, when it said (`retry-after`, else `ratelimit-reset`). */
  waitSeconds: number | undefined
}

/** Reports an answer to the pace; never throws (a pace that cannot be told is logged, not a failed send). */
export type PaceObserver = { observe(answer: RateAnswer): Promise<void> }

/**
 * What the pace must change after an answer: hold every slot for
 * `holdSeconds` (`rate-limited`: a 429; `window-spent`: `ratelimit-remaining`
 * was 0), and/or take the provider's `limit`. `perSecond` is the sender's
 * configured rate, against which a lower limit is judged.
 */
export type PaceReport = {
  perSecond: number
  holdSeconds?: number
  cause?: 'rate-limited' | 'window-spent'
  limit?: number
}

/** A 429 that named no wait: Resend's window is a second. */
const DEFAULT_HOLD_SECONDS = 1

/**
 * The report an answer calls for, or nothing when it changes nothing — most
 * answers — so that a send costs the pace one request, not two.
 *
 * @param perSecond - the configured rate
 * @param pacedAt - the rate the pace gave the last slot (the configured one, or a limit it already knows)
 */
export function reportOf(answer: RateAnswer, perSecond: number, pacedAt: number): PaceReport | undefined {
  const limit = wholeNumber(answer.headers.get('ratelimit-limit'))
  const remaining = wholeNumber(answer.headers.get('ratelimit-remaining'))
  const reset = wholeNumber(answer.headers.get('ratelimit-reset'))
  const report: PaceReport = { perSecond }
  if (answer.rateLimited) {
    report.holdSeconds = answer.waitSeconds ?? reset ?? DEFAULT_HOLD_SECONDS
    report.cause = 'rate-limited'
  } else if (remaining === 0 && reset !== undefined && reset > 0) {
    report.holdSeconds = reset
    report.cause = 'window-spent'
  }
  // Reported when it would change the pace: lower than the rate paced at, or higher than a lowered one.
  if (limit !== undefined && limit > 0 && Math.min(limit, perSecond) !== pacedAt) report.limit = limit
  return report.holdSeconds === undefined && report.limit === undefined ? undefined : report
}

function wholeNumber(header: string | null): number | undefined {
  return header !== null && /^\d+$/.test(header.trim()) ? Number(header) : undefined
}
