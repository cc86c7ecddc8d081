const encoder = new TextEncoder()

/** Tokens longer than this are refused before any work (a real one is about 150 characters). */
export const TOKEN_MAX_CHARS = 1024

const VERSION = 'v1'

/** Whose choice an unsubscribe token carries: one user, one kind, one channel. */
export type UnsubscribeScope = { userId: string; kind: string; channel: string }

function base64url(bytes: Uint8Array): string {
  let binary = ''
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')
}

/**
 * The bytes of canonical base64url text; `undefined` for anything else. A last
 * character whose unused bits are not zero decodes to the same bytes as the
 * canonical one, so it is refused: one token has exactly one spelling.
 */
function fromBase64url(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return undefined
  const binary = atob(text.replaceAll('-', '+').replaceAll('_', '/'))
  const bytes = Uint8Array.from(binary, (char) => char.charCodeAt(0))
  return base64url(bytes) === text ? bytes : undefined
}

async function hmacKey(secret: string): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
    'verify',
  ])
}

/**
 * The token of a one-click unsubscribe link:
 * `v1.{base64url(JSON [userId, kind, channel])}.{base64url(HMAC-SHA256(key, "v1.{payload}"))}`.
 * It names what it unsubscribes from and proves this Worker made it; it holds
 * no address and needs no storage.
 */
export async function signUnsubscribe(scope: UnsubscribeScope, secret: string): Promise<string> {
  const payload = base64url(encoder.encode(JSON.stringify([scope.userId, scope.kind, scope.channel])))
  const signed = `${VERSION}.${payload}`
  const mac = await crypto.subtle.sign('HMAC', await hmacKey(secret), encoder.encode(signed))
  return `${signed}.${base64url(new Uint8Array(mac))}`
}

/**
 * What a token unsubscribes from, when one of `secrets` (the current key, then
 * the one before a rotation) signed it; `undefined` for anything else — a
 * forged, truncated, re-assembled or foreign token. The MAC is checked with
 * `crypto.subtle.verify` (constant time) before the payload is read.
 */
export async function verifyUnsubscribe(
  token: string,
  secrets: readonly string[],
): Promise<UnsubscribeScope | undefined> {
  if (token.length > TOKEN_MAX_CHARS) return undefined
  const [version, payload, mac, ...rest] = token.split('.')
  if (version !== VERSION || payload === undefined || mac === undefined || rest.length > 0) return undefined
  const signature = fromBase64url(mac)
  if (signature?.length !== 32) return undefined
  const signed = encoder.encode(`${VERSION}.${payload}`)
  let valid = false
  for (const secret of secrets) {
    if (await crypto.subtle.verify('HMAC', await hmacKey(secret), signature, signed)) valid = true
  }
  if (!valid) return undefined
  return scopeOf(payload)
}

/** The payload of a token whose MAC held: made by `signUnsubscribe`, so a malformed one is a bug, not an attack. */
function scopeOf(payload: string): UnsubscribeScope | undefined {
  const bytes = fromBase64url(payload)
  if (!bytes) return undefined
  try {
    const value: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes))
    if (!Array.isArray(value) || value.length !== 3 || !value.every((part) => typeof part === 'string'))
      return undefined
    const [userId, kind, channel] = value as [string, string, string]
    return { userId, kind, channel }
  } catch {
    return undefined
  }
}

/** The link of a token: `{publicUrl}/u/{token}`. */
export function unsubscribeUrl(publicUrl: string, token: string): string {
  return `${publicUrl}/u/${token}`
}
