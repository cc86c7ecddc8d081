import { createMiddleware } from 'hono/factory'
import { configOf } from '../config.ts'
import { ApiError } from '../errors.ts'
import { recipientOfToken } from '../inbox/token.ts'
import { loggerFor } from '../log.ts'
import { clientOf, failedAttempt, refuseIfThrottled } from './attempts.ts'
import { bearerOf } from './auth.ts'
import type { AppEnv } from './openapi.ts'

/** How a browser's socket carries its token: a second subprotocol, `bearer.<token>` (a browser cannot set Authorization on a WebSocket). */
const PROTOCOL_BEARER = /^bearer\.(\S+)$/

/**
 * The inbox token of a request: `Authorization: Bearer <token>`, or on a
 * socket's upgrade the `bearer.<token>` subprotocol. Never a query
 * parameter: an address ends up in logs.
 */
export function inboxTokenOf(request: Request): string {
  const offered = (request.headers.get('sec-websocket-protocol') ?? '').split(',').map((value) => value.trim())
  const fromProtocol = offered.map((value) => PROTOCOL_BEARER.exec(value)?.[1]).find((token) => token !== undefined)
  return fromProtocol ?? bearerOf(request.headers.get('authorization') ?? undefined)
}

/**
 * Requires an end user's inbox token (src/inbox/token.ts) and sets
 * `recipient`: the feed a request reaches is the token's user's, and no
 * request names another. The token is checked first: a right one passes
 * whatever its client did before — many users may share one address (an
 * office, a carrier), and a 256-bit key is not guessed — and only a wrong one
 * meets the per-client throttle, as a failed attempt: 429 past the limit,
 * logged (never the token or the user) and not counted in D1 (./attempts.ts).
 * No token at all, or an expired one (`TOKEN_EXPIRED`, since every token ends
 * so), is no attempt.
 */
export function requireRecipient() {
  return createMiddleware<AppEnv>(async (c, next) => {
    const config = configOf(c.env)
    if (config.INBOX_TOKEN_SECRET === undefined) {
      throw new ApiError('UNAUTHORIZED', 'the in-app inbox is closed: INBOX_TOKEN_SECRET is not set')
    }
    const secrets = [config.INBOX_TOKEN_SECRET, config.INBOX_TOKEN_SECRET_PREVIOUS].filter(
      (secret): secret is string => secret !== undefined,
    )
    const token = inboxTokenOf(c.req.raw)
    try {
      c.set('recipient', await recipientOfToken(token, secrets, Math.floor(Date.now() / 1000)))
    } catch (error) {
      if (error instanceof ApiError && error.code === 'UNAUTHORIZED') {
        const client = clientOf(c.req.raw)
        refuseIfThrottled(client, 'inbox')
        // Why, never the token or the user: a host signing with the wrong secret shows here.
        loggerFor(c.env).warn('inbox.token-refused', { reason: error.message })
        await failedAttempt(c.env, client, 'inbox')
      }
      throw error
    }
    await next()
  })
}
