/**
 * Failed attempts to authenticate — an unknown bearer token on the API, a
 * wrong token on the console's sign-in form — counted per client with
 * Cloudflare's Rate Limiting binding (`AUTH_FAILURES`, wrangler.toml
 * `[[ratelimits]]`: https://developers.cloudflare.com/workers/runtime-apis/bindings/rate-limit/),
 * which is made for this and runs locally too. Past the limit the client is
 * answered 429 with `Retry-After` for the rest of the period, whatever token
 * it sends — a right guess included, or throttling would only slow the wrong
 * ones down.
 *
 * The binding counts per Cloudflare location, and says only "over" or not;
 * so that the refusal also holds for a token that would be right, this
 * isolate remembers the clients it throttled until their period ends. A
 * client that reaches another isolate is throttled there at its first
 * failure. What the binding cannot do — stop a guesser spread over many
 * addresses — the tokens' strength does (the configuration refuses weak and
 * example tokens outside local development).
 *
 * Counted in D1 (`notify_auth_failures_total{surface, outcome}`), at most
 * the limit's failures and one throttling per client and period: a flood of
 * wrong tokens does not become a flood of writes to the pipeline's database.
 */
import { ApiError } from '../errors.ts'
import { COUNTERS, canonicalLabels, incrementCounter } from '../metrics/counters.ts'

/** The binding's period, in seconds (wrangler.toml: `simple = { limit = 10, period = 60 }`). */
export const ATTEMPT_PERIOD_SECONDS = 60

/**
 * Where an attempt was made: the ingest route (the bridge's token), the
 * operator API, the console's sign-in form, or an end user's inbox (a token
 * its signature refutes; an expired one is no attempt; throttled, not counted). Each is counted and throttled
 * apart: an operator who mistypes a token behind the same address as the
 * bridge does not hold the bridge's events back.
 */
export type Surface = 'ingest' | 'api' | 'console' | 'inbox'

/** The clients this isolate throttled, by surface (`surface:client`), until when (ms); bounded, oldest dropped first. */
const throttled = new Map<string, number>()
const REMEMBERED = 10_000

/**
 * The client of a request, as Cloudflare names it (`CF-Connecting-IP`); none
 * where nothing does (a request made inside the Worker's own tests). A
 * request of no known client is counted, never throttled: one key for all
 * would let one guesser lock every operator out.
 */
export function clientOf(request: Request): string | undefined {
  return request.headers.get('cf-connecting-ip') || undefined
}

/** Seconds until `key` (surface and client) may try again, if this isolate throttled it and its period is not over. */
function waitOf(key: string, now: number): number | undefined {
  const until = throttled.get(key)
  if (until === undefined) return undefined
  if (until <= now) {
    throttled.delete(key)
    return undefined
  }
  return Math.ceil((until - now) / 1000)
}

const refusal = (seconds: number) =>
  new ApiError('TOO_MANY_ATTEMPTS', `too many unknown tokens from this client: try again in ${seconds} s`, undefined, {
    retryAfter: seconds,
  })

/** Throws the 429 of a client this isolate throttled on `surface`, before its token is even compared. */
export function refuseIfThrottled(client: string | undefined, surface: Surface, now = Date.now()): void {
  if (client === undefined) return
  const seconds = waitOf(`${surface}:${client}`, now)
  if (seconds !== undefined) throw refusal(seconds)
}

/**
 * Records a failed attempt of `client`: counted, and once over the binding's
 * limit, the client throttled for the period — this failure answered 429
 * instead of 401. Without the binding (a deployment that lacks it: the
 * doctor says so) failures are only counted.
 */
export async function failedAttempt(
  env: Env,
  client: string | undefined,
  surface: Surface,
  now = Date.now(),
): Promise<void> {
  const limiter = (env as { AUTH_FAILURES?: RateLimit }).AUTH_FAILURES
  const key = `${surface}:${client}`
  const { success } = limiter && client !== undefined ? await limiter.limit({ key }) : { success: true }
  // An end user's inbox is not counted in D1: its callers are the host's users, as many as it has, and a
  // host that signs with a wrong secret would turn every page of every user into a write to the
  // pipeline's one writer. Its refusals are throttled all the same, and logged by the route.
  const count = (outcome: 'refused' | 'throttled') =>
    surface === 'inbox'
      ? Promise.resolve()
      : incrementCounter(env.DB, COUNTERS.authFailures, canonicalLabels({ surface, outcome }), 1)
          .run()
          .catch(() => undefined)
  if (success) {
    await count('refused')
    return
  }
  if (waitOf(key, now) === undefined) {
    if (throttled.size >= REMEMBERED) throttled.delete(throttled.keys().next().value as string)
    throttled.set(key, now + ATTEMPT_PERIOD_SECONDS * 1000)
    await count('throttled')
  }
  throw refusal(waitOf(key, now) ?? ATTEMPT_PERIOD_SECONDS)
}
