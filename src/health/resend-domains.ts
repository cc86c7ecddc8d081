/**
 * Asks Resend whether the sender's domain is verified: `GET /domains`
 * (https://resend.com/docs/api-reference/domains/list-domains; without
 * `limit`, every domain of the key's team in one answer, each with its
 * `name` and `status`). A sending-only key may not list domains: Resend
 * answers 401 `restricted_api_key` (https://resend.com/docs/api-reference/errors),
 * which says nothing about the domain and is no fault. Like every request to
 * Resend, it carries a `User-Agent` and the bearer key.
 */
import { USER_AGENT } from '../version.ts'
import type { DomainCheck } from './types.ts'

/** The longest the doctor waits for Resend: the check is one line of a report, not worth a slow page. */
export const DOMAIN_CHECK_TIMEOUT_MS = 3000

type ListDomains = { data?: { name?: unknown; status?: unknown }[] }

/** Resend's word on `domain` (lower case), within DOMAIN_CHECK_TIMEOUT_MS. */
export async function checkResendDomain(
  options: { apiKey: string; baseUrl: string },
  domain: string,
  fetcher: typeof fetch = fetch,
): Promise<DomainCheck> {
  let response: Response
  let text: string
  try {
    response = await fetcher(`${options.baseUrl.replace(/\/+$/, '')}/domains`, {
      headers: { authorization: `Bearer ${options.apiKey}`, 'user-agent': USER_AGENT, accept: 'application/json' },
      signal: AbortSignal.timeout(DOMAIN_CHECK_TIMEOUT_MS),
    })
    text = await response.text()
  } catch (error) {
    const timedOut = error instanceof Error && error.name === 'TimeoutError'
    return {
      outcome: 'unanswered',
      detail: timedOut ? `no answer within ${DOMAIN_CHECK_TIMEOUT_MS} ms` : String(error),
    }
  }
  const body = parsed(text)
  const name = typeof body?.name === 'string' ? body.name : ''
  if (response.status === 401 && name === 'restricted_api_key') return { outcome: 'restricted-key' }
  if (response.status === 401 || response.status === 403) {
    return { outcome: 'key-refused', detail: `${response.status} ${name || text.slice(0, 100)}` }
  }
  const domains = (body as ListDomains | undefined)?.data
  if (!response.ok || !Array.isArray(domains)) {
    return { outcome: 'unanswered', detail: `HTTP ${response.status} ${text.slice(0, 100)}` }
  }
  const found = domains.find((entry) => typeof entry.name === 'string' && entry.name.toLowerCase() === domain)
  if (!found) return { outcome: 'not-found', listed: domains.length }
  return found.status === 'verified' ? { outcome: 'verified' } : { outcome: 'unverified', status: String(found.status) }
}

function parsed(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}
