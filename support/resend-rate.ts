/**
 * Resend's rate limit, as its usage-limits page documents it, for the test and
 * chaos stand-ins (an email provider's API cannot run here): "The default
 * maximum rate limit is 5 requests per second per team. This limit applies
 * across all API keys associated with your team", and every answer carries
 * `ratelimit-limit`, `ratelimit-remaining`, `ratelimit-reset` ("How many
 * seconds until the limits are reset") and, on a 429, `retry-after` ("How
 * many seconds you should wait before making a follow-up request")
 * — https://resend.com/docs/api-reference/rate-limit. The limit "can be
 * increased for trusted senders upon request", so a stand-in may give a team
 * a higher one.
 */

/** Resend's documented default: requests per second per team. */
export const RESEND_DEFAULT_REQUESTS_PER_SECOND = 5

/** What the limiter decided for one request, and the headers Resend sends with any answer to it. */
export type RateDecision = { allowed: boolean; headers: Record<string, string> }

/** The window Resend's limit is counted in: "requests per second". */
const WINDOW_MS = 1000

/**
 * A sliding one-second window per team: a request is allowed when fewer than
 * the team's limit arrived in the second before it (`(at - 1000, at]`). The
 * page does not say how Resend keeps its window. A sliding window is the
 * strictest that honours "N requests per second": every fixed window of a
 * second, wherever it starts, is one of the windows it checks, so a pace that
 * never meets a refusal here never meets one from a fixed window either. A
 * refused request counts too (a client that keeps knocking keeps the window
 * full), which is again the stricter reading. `take(team)` counts one
 * request of that team, called when it arrives (not when its body has been
 * read), so in arrival order; the headers belong on the answer either way,
 * with `retry-after` on a refusal: the whole seconds until the window has a
 * place again, rounded up as Resend's headers are whole seconds.
 */
export function resendRateLimiter(options: {
  /** Requests per second per team; Resend's default when not given. */
  requestsPerSecond?: number
  /** A team's own limit (one raised on request), by team. */
  perTeam?: (team: string) => number | undefined
  now?: () => number
}) {
  const now = options.now ?? Date.now
  /** Arrivals of each team's requests within the last second, oldest first. */
  const arrivals = new Map<string, number[]>()
  return {
    take(team: string): RateDecision {
      const limit = options.perTeam?.(team) ?? options.requestsPerSecond ?? RESEND_DEFAULT_REQUESTS_PER_SECOND
      const at = now()
      const log = arrivals.get(team) ?? []
      arrivals.set(team, log)
      while (log.length > 0 && (log[0] as number) <= at - WINDOW_MS) log.shift()
      const allowed = log.length < limit
      log.push(at)
      // The window has a place again when all but limit - 1 of what it holds have left it.
      const freeAt = (log[log.length - limit] ?? at - WINDOW_MS) + WINDOW_MS
      const reset = Math.max(1, Math.ceil(((log[0] as number) + WINDOW_MS - at) / 1000))
      const headers: Record<string, string> = {
        'ratelimit-limit': String(limit),
        'ratelimit-remaining': String(Math.max(0, limit - log.length)),
        'ratelimit-reset': String(reset),
      }
      if (!allowed) headers['retry-after'] = String(Math.max(1, Math.ceil((freeAt - at) / 1000)))
      return { allowed, headers }
    },
  }
}
