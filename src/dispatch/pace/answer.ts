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
  /** The request's idempotency key: which send, and so which slot, the answer is to. */
  key: string
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
 * was 0 before our own slots explain it — someone else sends for the team
 * too), and/or take the provider's `limit`. `perSecond` is the sender's
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
 * `ratelimit-remaining: 0` is what a pace that uses the rate in full hears on
 * most answers: Resend counted a full window, and the window was ours — the
 * slots started within `WINDOW_MS` up to this one (`startedInWindow`) are as
 * many as it counted — so the pace, which spaces the next slot already, needs
 * no telling. Only a full window that our slots do not fill means another
 * sender spends the team's rate (another service, another key of the team);
 * then every sender waits for its `ratelimit-reset`. A send that had no slot
 * (the pace could not be reached) explains nothing.
 *
 * @param perSecond - the configured rate
 * @param pacedAt - the rate the pace gave the last slot (the configured one, or a limit it already knows)
 * @param startedInWindow - the pace's count for this request's slot (./slots.ts), when it had one
 */
export function reportOf(
  answer: RateAnswer,
  perSecond: number,
  pacedAt: number,
  startedInWindow?: number,
): PaceReport | undefined {
  const limit = wholeNumber(answer.headers.get('ratelimit-limit'))
  const remaining = wholeNumber(answer.headers.get('ratelimit-remaining'))
  const reset = wholeNumber(answer.headers.get('ratelimit-reset'))
  const report: PaceReport = { perSecond }
  if (answer.rateLimited) {
    report.holdSeconds = answer.waitSeconds ?? reset ?? DEFAULT_HOLD_SECONDS
    report.cause = 'rate-limited'
  } else if (remaining === 0 && reset !== undefined && reset > 0) {
    const counted = limit ?? pacedAt
    if (startedInWindow === undefined || startedInWindow < counted) {
      report.holdSeconds = reset
      report.cause = 'window-spent'
    }
  }
  // Reported when it would change the pace: lower than the rate paced at, or higher than a lowered one.
  if (limit !== undefined && limit > 0 && Math.min(limit, perSecond) !== pacedAt) report.limit = limit
  return report.holdSeconds === undefined && report.limit === undefined ? undefined : report
}

function wholeNumber(header: string | null): number | undefined {
  return header !== null && /^\d+$/.test(header.trim()) ? Number(header) : undefined
}
