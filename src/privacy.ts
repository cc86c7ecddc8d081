/**
 * How a recipient's personal data looks to an operator who has not revealed
 * it: enough to tell two recipients apart and recognise the one asked about,
 * not enough to write to them. Revealing is an audited read (src/api/audited.ts).
 */

/**
 * `anna.client@example.com` → `a***@example.com` (the logs' mask, so an
 * operator sees the same form everywhere); an empty value stays empty.
 */
export function maskAddress(address: string | null | undefined): string {
  if (!address) return ''
  const at = address.indexOf('@')
  return at <= 0 ? '***' : `${address[0]}***${address.slice(at)}`
}

/** `Анна Клиент` → `А***`: the first letter alone, so a name is never shown whole. */
export function maskName(name: string | null | undefined): string {
  const first = [...(name ?? '').trim()][0]
  return first ? `${first}***` : ''
}
