/**
 * What a recipient's mail carries from the configuration: its sender
 * (EMAIL_FROM, whose domain the provider must accept) and its links
 * (PUBLIC_URL, where one-click unsubscribe points).
 */

import type { TransportName } from '../config.ts'
import { domainOf, isPlaceholderDomain, isPlaceholderHost } from './placeholders.ts'
import { transportsOf } from './transport.ts'
import type { Deployment, DomainCheck, Finding } from './types.ts'

/** Resend's domains page: each domain and subdomain is added and verified on its own there. */
const RESEND_DOMAINS_DOC = 'https://resend.com/docs/dashboard/domains/introduction'

const SET_PUBLIC_URL =
  'set PUBLIC_URL in wrangler.toml to the https address recipients reach the Worker at (its workers.dev URL or a custom domain), then npm run deploy'

/** What each transport asks of the sender's domain. */
const SENDER_DOMAIN: Record<TransportName, string> = {
  resend: 'verified in Resend (resend.com/domains)',
  cloudflare: 'onboarded to Cloudflare Email Sending',
}

/** Where a sender must come from: a domain every configured transport sends from. */
function senderFix(deployment: Deployment): string {
  const domain = transportsOf(deployment).map((transport) => SENDER_DOMAIN[transport])
  return `set EMAIL_FROM in wrangler.toml to an address on a domain ${domain.join(' and ')}, then npm run deploy`
}

/** EMAIL_FROM: set, not a placeholder, and on a domain the provider sends from. */
export function senderFindings(deployment: Deployment): Finding[] {
  const from = deployment.vars.EMAIL_FROM
  if (!from) {
    return [
      {
        id: 'sender-missing',
        severity: 'blocker',
        message: 'EMAIL_FROM is not set: the Worker has no sender, and refuses to run without one',
        fix: senderFix(deployment),
      },
    ]
  }
  // Not an address: the configuration check names it.
  if (!from.includes('@')) return []
  const domain = domainOf(from)
  if (isPlaceholderDomain(domain)) {
    return [
      {
        id: 'sender-placeholder',
        severity: 'blocker',
        message: `EMAIL_FROM is on ${domain}, a name reserved for examples (RFC 2606, RFC 6761): no provider sends from it`,
        fix: senderFix(deployment),
      },
    ]
  }
  const transports = transportsOf(deployment)
  const findings: Finding[] = []
  if (transports.includes('cloudflare')) {
    findings.push({
      id: 'sender-domain-unchecked',
      severity: 'info',
      message: `Cloudflare Email Sending sends from ${domain} only once the domain is onboarded, and while the account is new only to verified addresses; the Worker cannot ask whether it is`,
      fix: `onboard ${domain} to Cloudflare Email Sending and publish its DNS records (docs/deploy.md)`,
    })
  }
  // Resend is asked whichever place it has in EMAIL_TRANSPORTS: a standby that refuses fails over to nothing.
  if (transports.includes('resend') && deployment.domain)
    findings.push(...domainFindings(deployment.domain, domain, deployment))
  return findings
}

/** What Resend's answer about the sender's domain means. */
function domainFindings(check: DomainCheck, domain: string, deployment: Deployment): Finding[] {
  switch (check.outcome) {
    case 'verified':
      return []
    case 'unverified':
      return [
        {
          id: 'sender-domain-unverified',
          severity: 'blocker',
          message: `Resend lists ${domain} as ${check.status}, not verified: it refuses to send from it`,
          fix: `verify ${domain} in Resend (Domains → ${domain} → Verify DNS records; ${RESEND_DOMAINS_DOC}), or ${senderFix(deployment)}`,
        },
      ]
    case 'not-found':
      return [
        {
          id: 'sender-domain-not-found',
          severity: 'blocker',
          message: `Resend has no domain ${domain} among the ${check.listed} of this key's team (each subdomain is added and verified on its own)`,
          fix: `add ${domain} in Resend and verify it (${RESEND_DOMAINS_DOC}), or ${senderFix(deployment)}`,
        },
      ]
    case 'restricted-key':
      return [
        {
          id: 'sender-domain-unchecked',
          severity: 'info',
          message: `cannot check the domain with a sending-only key: Resend lets RESEND_API_KEY send, not list domains (401 restricted_api_key), so whether ${domain} is verified is not known here`,
          fix: `check that resend.com/domains lists ${domain} as verified`,
        },
      ]
    case 'key-refused':
      return [
        {
          id: 'resend-key-refused',
          severity: 'blocker',
          message: `Resend refused RESEND_API_KEY (${check.detail}): it would refuse every send too`,
          fix: 'npx wrangler secret put RESEND_API_KEY  # a key from resend.com/api-keys',
        },
      ]
    case 'unanswered':
      return [
        {
          id: 'sender-domain-unchecked',
          severity: 'warning',
          message: `could not ask Resend whether ${domain} is verified: ${check.detail}`,
          fix: `run the doctor again; if it persists, check RESEND_API_URL (${deployment.vars.RESEND_API_URL ?? 'https://api.resend.com'})`,
        },
      ]
  }
}

/** PUBLIC_URL: set, and a host recipients can reach (unsubscribe links are made from it). */
export function publicUrlFindings(deployment: Deployment): Finding[] {
  const url = deployment.vars.PUBLIC_URL
  if (!url) {
    return [
      {
        id: 'public-url-missing',
        severity: 'blocker',
        message:
          'PUBLIC_URL is not set: the Worker refuses to run without it, and unsubscribe links would point nowhere',
        fix: SET_PUBLIC_URL,
      },
    ]
  }
  let host: string
  try {
    host = new URL(url).hostname
  } catch {
    // Not a URL: the configuration check names it.
    return []
  }
  if (!isPlaceholderHost(host)) return []
  return [
    {
      id: 'public-url-placeholder',
      severity: 'warning',
      message: `PUBLIC_URL ${url} is a placeholder: the unsubscribe link of every email would point nowhere`,
      fix: SET_PUBLIC_URL,
    },
  ]
}
