import { verify } from 'hono/jwt'
import { ApiError } from '../errors.ts'

/** The audience an inbox token names: a token the host signs for anything else never opens a feed. */
export const INBOX_AUDIENCE = 'notify-edge:inbox'

/** The longest an inbox token may live, from now: a host that signs longer ones is refused, not trusted. */
export const INBOX_TOKEN_MAX_SECONDS = 24 * 60 * 60

/** Longest user id a token may name (the contact replica's ids are shorter). */
const USER_ID_MAX = 256

/** Who an inbox token lets in, and until when (seconds since the epoch). */
export type Recipient = { userId: string; expiresAt: number }

/**
 * The recipient of an inbox token: a JWT (RFC 7519) the host application
 * signs with HS256 and the secret it shares with this Worker, naming its user
 * (`sub`), this audience (`aud`) and an expiry (`exp`) at most a day ahead
 * (and, if it says so, when it starts: `nbf`).
 * Each configured secret (current, then the previous one during a rotation)
 * is tried; WebCrypto's HMAC verification compares in constant time. The
 * signature is checked before anything the token claims is believed, so an
 * unsigned token learns nothing, not even that it expired: a forged one is
 * `UNAUTHORIZED`, a signed one past its `exp` `TOKEN_EXPIRED` (the client
 * asks its host for a new one).
 */
export async function recipientOfToken(token: string, secrets: string[], now: number): Promise<Recipient> {
  let claims: Record<string, unknown> | undefined
  for (const secret of secrets) {
    try {
      // Expiry and not-before times are checked below, once the signature holds; the issue time is not used.
      claims = await verify(token, secret, { alg: 'HS256', exp: false, nbf: false, iat: false })
      break
    } catch {}
  }
  if (claims === undefined || typeof claims !== 'object' || claims === null) {
    throw new ApiError('UNAUTHORIZED', 'not an inbox token signed with this Worker’s secret')
  }
  const { sub, aud, exp, nbf } = claims
  if (typeof sub !== 'string' || sub.length === 0 || sub.length > USER_ID_MAX) {
    throw new ApiError('UNAUTHORIZED', `the inbox token must name its user in \`sub\` (1–${USER_ID_MAX} characters)`)
  }
  if (!(Array.isArray(aud) ? aud : [aud]).includes(INBOX_AUDIENCE)) {
    throw new ApiError('UNAUTHORIZED', `the inbox token's \`aud\` must be "${INBOX_AUDIENCE}"`)
  }
  if (typeof exp !== 'number' || !Number.isFinite(exp)) {
    throw new ApiError('UNAUTHORIZED', 'the inbox token must say when it expires (`exp`, seconds since the epoch)')
  }
  if (nbf !== undefined && (typeof nbf !== 'number' || !(nbf <= now))) {
    throw new ApiError('UNAUTHORIZED', 'the inbox token is not valid yet (`nbf`)')
  }
  if (exp <= now) throw new ApiError('TOKEN_EXPIRED', 'the inbox token expired: ask the host application for a new one')
  if (exp > now + INBOX_TOKEN_MAX_SECONDS) {
    throw new ApiError(
      'UNAUTHORIZED',
      `the inbox token lives too long: \`exp\` at most ${INBOX_TOKEN_MAX_SECONDS} s ahead`,
    )
  }
  return { userId: sub, expiresAt: exp }
}
