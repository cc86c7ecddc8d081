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
 * was 0 and the pace is careful, or our own slots do not explain it), be
 * careful for a while (`shared`: someone else spends the team's rate, or our
 * requests reach Resend further apart than their slots), and/or take the
 * provider's `limit`. `perSecond` is the sender's configured rate, against
 * which a lower limit is judged.
 */
export type PaceReport = {
  perSecond: number
  holdSeconds?: number
  cause?: 'rate-limited' | 'window-spent'
  shared?: boolean
  limit?: number
}

/** What the pace said about the slot an answer's request went in (./slots.ts). */
export type SlotSeen = { startedInWindow: number; careful: boolean }

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
 * no telling. A window Resend counted fuller than our slots make it (full or
 * not), and any 429 for the rate, are signs that another sender spends the
 * team's rate (another service, another key of the team), or that our
 * requests reach Resend further apart than their slots: the pace turns
 * careful (`shared`), and while it is, every full window holds every sender
 * until its `ratelimit-reset` — the slack the other sender needs. A send that
 * had no slot (the pace could not be reached) explains nothing either.
 *
 * @param perSecond - the configured rate
 * @param pacedAt - the rate the pace gave the last slot (the configured one, or a limit it already knows)
 * @param slot - what the pace said about this request's slot, when it had one
 */
export function reportOf(
  answer: RateAnswer,
  perSecond: number,
  pacedAt: number,
  slot?: SlotSeen,
): PaceReport | undefined {
  const limit = wholeNumber(answer.headers.get('ratelimit-limit'))
  const remaining = wholeNumber(answer.headers.get('ratelimit-remaining'))
  const reset = wholeNumber(answer.headers.get('ratelimit-reset'))
  const report: PaceReport = { perSecond }
  // What Resend counted in this request's window beyond our own slots.
  const counted = remaining === undefined ? undefined : (limit ?? pacedAt) - remaining
  const foreign = slot === undefined || (counted !== undefined && counted > slot.startedInWindow)
  if (answer.rateLimited) {
    report.holdSeconds = answer.waitSeconds ?? reset ?? DEFAULT_HOLD_SECONDS
    report.cause = 'rate-limited'
    report.shared = true
  } else if (remaining === 0 && reset !== undefined && reset > 0 && (foreign || slot?.careful === true)) {
    report.holdSeconds = reset
    report.cause = 'window-spent'
    report.shared = foreign
  } else if (foreign && slot !== undefined) {
    report.shared = true
  }
  // Reported when it would change the pace: lower than the rate paced at, or higher than a lowered one.
  if (limit !== undefined && limit > 0 && Math.min(limit, perSecond) !== pacedAt) report.limit = limit
  return report.holdSeconds === undefined && report.limit === undefined && !report.shared ? undefined : report
}

function wholeNumber(header: string | null): number | undefined {
  return header !== null && /^\d+$/.test(header.trim()) ? Number(header) : undefined
}
