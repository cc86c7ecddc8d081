import { normalizeAddress } from '../suppression/suppression-store.ts'

const encoder = new TextEncoder()

/** What every pseudonym starts with; the audit trail's update trigger (migration 0010) accepts only this form. */
export const PSEUDONYM_PREFIX = 'hmac:'

// Fixed in the input so that the key, shared by default with the unsubscribe links, signs nothing
// else with the same bytes: a pseudonym can never be a valid link signature, nor the reverse.
const DOMAIN = 'notify-edge erased address v1\n'

const keys = new Map<string, Promise<CryptoKey>>()

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret)
  if (!key) {
    key = crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'])
    keys.set(secret, key)
  }
  return key
}

/**
 * The pseudonym of an address: `hmac:` and the hex HMAC-SHA256, under the
 * erasure key (ERASURE_HASH_KEY, else UNSUBSCRIBE_SIGNING_KEY), of the address
 * as the suppression list compares it (ASCII letters lower-cased). An erased
 * address's suppression keeps only this, so the same address is recognised
 * when it comes back, while the stored form cannot be reversed: a plain hash
 * of an address falls to a dictionary of likely addresses, a keyed one does
 * not without the key, which lives in the Worker's secrets and not in D1.
 */
export async function pseudonymOf(address: string, secret: string): Promise<string> {
  const mac = await crypto.subtle.sign(
    'HMAC',
    await hmacKey(secret),
    encoder.encode(`${DOMAIN}${normalizeAddress(address)}`),
  )
  return `${PSEUDONYM_PREFIX}${[...new Uint8Array(mac)].map((byte) => byte.toString(16).padStart(2, '0')).join('')}`
}

/**
 * The pseudonym of a user id, for the record of what an erasure removed
 * (`erased_addresses`): `pseudonymOf` of `user:{id}`, which no address can be
 * (an address has an `@`).
 */
export function userPseudonymOf(userId: string, secret: string): Promise<string> {
  return pseudonymOf(`user:${userId}`, secret)
}
