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

/**
 * A fixed one-second window per team. `take(team)` counts one request of that
 * team and says whether it is within the limit; the headers belong on the
 * answer either way (with `retry-after` on a refusal). The page does not say
 * how the window is kept; a fixed window is the simplest that honours "N
 * requests per second".
 */
export function resendRateLimiter(options: {
  /** Requests per second per team; Resend's default when not given. */
  requestsPerSecond?: number
  /** A team's own limit (one raised on request), by team. */
  perTeam?: (team: string) => number | undefined
  now?: () => number
}) {
  const now = options.now ?? Date.now
  const windows = new Map<string, { start: number; count: number }>()
  return {
    take(team: string): RateDecision {
      const limit = options.perTeam?.(team) ?? options.requestsPerSecond ?? RESEND_DEFAULT_REQUESTS_PER_SECOND
      const at = now()
      let window = windows.get(team)
      if (!window || at - window.start >= 1000) {
        window = { start: at, count: 0 }
        windows.set(team, window)
      }
      window.count += 1
      const reset = Math.max(1, Math.ceil((window.start + 1000 - at) / 1000))
      const allowed = window.count <= limit
      const headers: Record<string, string> = {
        'ratelimit-limit': String(limit),
        'ratelimit-remaining': String(Math.max(0, limit - window.count)),
        'ratelimit-reset': String(reset),
      }
      if (!allowed) headers['retry-after'] = String(reset)
      return { allowed, headers }
    },
  }
}
