/**
 * The console's session cookie: `{payload}.{mac}`, base64url, where the MAC
 * is HMAC-SHA256 with CONSOLE_SESSION_KEY (the previous key is accepted, so
 * the key rotates without signing everyone out). The payload names the
 * operator and role, when the session ends, the CSRF token of its forms, and
 * a fingerprint of the token it was opened with: a session opened with a
 * token that is no longer configured is over. It names its row in D1 too:
 * a signed cookie alone cannot be taken back, the row can (./sessions.ts).
 */
import { z } from 'zod'

const encoder = new TextEncoder()

const SessionSchema = z.object({
  /** The session's row in D1 (./sessions.ts): ended there, it opens nothing, whatever this cookie says. */
  sid: z.string().min(16).max(64),
  /** Operator name as the audit trail shows it. */
  name: z.string().min(1).max(320),
  role: z.enum(['admin', 'viewer']),
  /** Seconds since the epoch after which the session is over. */
  exp: z.number().int(),
  /** The CSRF token every form of this session carries. */
  csrf: z.string().min(16).max(64),
  /** `token:` + HMAC of the token signed in with, or `access` for a Cloudflare Access identity. */
  via: z.string().min(1).max(200),
})

/** A console session. */
export type Session = z.infer<typeof SessionSchema>

/** The cookie's name; `__Host-` pins it to this origin, path `/`, and `Secure`. */
export const SESSION_COOKIE = '__Host-notify-edge-console'

function base64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replaceAll('+', '-')
    .replaceAll('/', '_')
    .replace(/=+$/, '')
}

function fromBase64url(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return undefined
  try {
    return Uint8Array.from(atob(text.replaceAll('-', '+').replaceAll('_', '/')), (char) => char.charCodeAt(0))
  } catch {
    return undefined
  }
}

async function hmacKey(secret: string): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
    'verify',
  ])
}

/** A random token for a session's forms. */
export function newCsrfToken(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(24)))
}

/** HMAC of a bearer token under the session key: what a session remembers of the token it was opened with. */
export async function tokenFingerprint(token: string, key: string): Promise<string> {
  const mac = await crypto.subtle.sign('HMAC', await hmacKey(key), encoder.encode(`console-token:${token}`))
  return `token:${base64url(new Uint8Array(mac)).slice(0, 32)}`
}

/** The cookie value of a session. */
export async function signSession(session: Session, key: string): Promise<string> {
  const payload = base64url(encoder.encode(JSON.stringify(session)))
  const mac = await crypto.subtle.sign('HMAC', await hmacKey(key), encoder.encode(payload))
  return `${payload}.${base64url(new Uint8Array(mac))}`
}

/**
 * The session of a cookie value, when one of `keys` signed it and it has not
 * ended; the MAC is checked (in constant time, by WebCrypto) before the
 * payload is read.
 */
export async function verifySession(
  value: string | undefined,
  keys: readonly string[],
  now: Date,
): Promise<Session | undefined> {
  const [payload, mac, extra] = (value ?? '').split('.')
  if (!payload || !mac || extra !== undefined) return undefined
  const signature = fromBase64url(mac)
  if (!signature) return undefined
  for (const key of keys) {
    if (await crypto.subtle.verify('HMAC', await hmacKey(key), signature, encoder.encode(payload))) {
      const bytes = fromBase64url(payload)
      if (!bytes) return undefined
      let parsed: unknown
      try {
        parsed = JSON.parse(new TextDecoder().decode(bytes))
      } catch {
        return undefined
      }
      const session = SessionSchema.safeParse(parsed)
      return session.success && session.data.exp > now.getTime() / 1000 ? session.data : undefined
    }
  }
  return undefined
}
