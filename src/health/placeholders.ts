/**
 * The stand-in values of the repository's wrangler.toml, and the names that
 * can never be a real sender or host: the top-level names reserved by
 * RFC 2606 and RFC 6761 (`.example`, `.test`, `.invalid`, `.localhost`) and
 * the second-level ones reserved for documentation (example.com, .net, .org).
 */

/** The D1 `database_id` wrangler.toml ships with, before `wrangler d1 create`. */
export const PLACEHOLDER_D1_ID = '00000000-0000-4000-8000-000000000001'

/** The KV namespace `id` wrangler.toml ships with, before `wrangler kv namespace create`. */
export const PLACEHOLDER_KV_ID = '00000000000000000000000000000001'

const RESERVED_TOP_LEVEL = new Set(['example', 'test', 'invalid', 'localhost'])
const RESERVED_DOMAINS = ['example.com', 'example.net', 'example.org']

/** Whether `domain` is, or is under, a name reserved for examples and tests. */
export function isPlaceholderDomain(domain: string): boolean {
  const name = domain.toLowerCase().replace(/\.$/, '')
  const top = name.slice(name.lastIndexOf('.') + 1)
  return (
    RESERVED_TOP_LEVEL.has(top) ||
    RESERVED_DOMAINS.some((reserved) => name === reserved || name.endsWith(`.${reserved}`))
  )
}

/**
 * Whether a host is a placeholder: a reserved name, or a workers.dev host of
 * the account subdomain `example` (wrangler.toml's
 * `notify-edge.example.workers.dev`, where a real one names your account).
 */
export function isPlaceholderHost(host: string): boolean {
  return isPlaceholderDomain(host) || /(^|\.)example\.workers\.dev\.?$/i.test(host)
}

/** The domain of an address (after its last `@`). */
export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase()
}
