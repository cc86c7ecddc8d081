/**
 * Opaque cursor text: a JSON value as base64url, without padding. A cursor
 * is a page's place, handed to a client to give back unchanged; it is not a
 * secret and not signed.
 */

/** The value as opaque text. */
export function toOpaque(value: unknown): string {
  return btoa(JSON.stringify(value)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')
}

/** The value an opaque text holds, or undefined when the text is not one (not base64url, not JSON). */
export function fromOpaque(text: string): unknown {
  try {
    return JSON.parse(atob(text.replaceAll('-', '+').replaceAll('_', '/')))
  } catch {
    return undefined
  }
}
