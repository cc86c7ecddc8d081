/**
 * What the chosen transport needs to send and to hear back: its secrets, no
 * pause, and a way for delivery events to come back.
 */
import type { Deployment, Finding, PauseShown } from './types.ts'

/** The configured transport (the schema's default when unset). */
export function transportOf(deployment: Pick<Deployment, 'vars'>): 'cloudflare' | 'resend' {
  return deployment.vars.EMAIL_TRANSPORT === 'resend' ? 'resend' : 'cloudflare'
}

/** Secrets without which the Worker answers nothing. */
const REQUIRED_SECRETS = ['INGEST_TOKEN', 'ADMIN_TOKEN', 'UNSUBSCRIBE_SIGNING_KEY']

const put = (name: string) => `npx wrangler secret put ${name}`

/** Secrets of the Worker and of the transport, where they can be seen. */
export function secretFindings(deployment: Deployment): Finding[] {
  const secrets = deployment.secrets
  if (!secrets) return []
  const findings: Finding[] = []
  const missing = REQUIRED_SECRETS.filter((name) => !secrets.includes(name))
  if (missing.length > 0) {
    findings.push({
      id: 'secrets-missing',
      severity: 'blocker',
      message: `${missing.join(', ')} not set: the Worker refuses to run without ${missing.length === 1 ? 'it' : 'them'}`,
      fix: missing.map(put).join('; '),
    })
  }
  if (transportOf(deployment) !== 'resend') return findings
  if (!secrets.includes('RESEND_API_KEY')) {
    findings.push({
      id: 'resend-key-missing',
      severity: 'blocker',
      message: 'EMAIL_TRANSPORT is resend and RESEND_API_KEY is not set: nothing can be sent',
      fix: `${put('RESEND_API_KEY')}  # a key from resend.com/api-keys; sending access is enough`,
    })
  }
  if (!secrets.includes('RESEND_WEBHOOK_SECRET')) {
    findings.push({
      id: 'webhook-secret-missing',
      severity: 'warning',
      message:
        'RESEND_WEBHOOK_SECRET is not set: POST /v1/webhooks/resend refuses every event, so no delivery event (delivered, bounced, complained) reaches the Worker and bounces never reach the suppression list',
      fix: `add a webhook in Resend for {PUBLIC_URL}/v1/webhooks/resend, then ${put('RESEND_WEBHOOK_SECRET')} (docs/deploy.md, "The recipient loop")`,
    })
  }
  return findings
}

/** How delivery events come back through the cloudflare transport, which no Worker can see. */
export function deliveryEventFindings(deployment: Deployment): Finding[] {
  if (transportOf(deployment) !== 'cloudflare') return []
  return [
    {
      id: 'delivery-events-subscription',
      severity: 'info',
      message:
        'with the cloudflare transport, delivery events (delivered, bounced, complained) reach the Worker only through an Email Sending event subscription of the notify-email-events queue, which the Worker cannot see',
      fix: 'npx wrangler queues subscription create notify-email-events --source email.sending --zone-id <ZONE_ID> --domain <sending domain> --events message.delivered,message.deferred,message.bounced,message.failed,message.rejected,message.complained (docs/deploy.md, "The recipient loop")',
    },
  ]
}

/** What fixes a pause, by the provider's code (src/dispatch/transports: which refusals pause). */
const PAUSE_FIXES: [RegExp, string][] = [
  [
    /^(missing_api_key|invalid_api_key|restricted_api_key)$/,
    `${put('RESEND_API_KEY')}  # a key that may send from the EMAIL_FROM domain`,
  ],
  [
    /^(validation_error|invalid_from_address)$/,
    'verify the EMAIL_FROM domain in Resend (resend.com/domains), or set EMAIL_FROM in wrangler.toml to an address on a verified domain',
  ],
  [
    /^(E_SENDER_NOT_VERIFIED|E_SENDER_DOMAIN_NOT_AVAILABLE)$/,
    'onboard the EMAIL_FROM domain to Cloudflare Email Sending, or set EMAIL_FROM in wrangler.toml to an address on an onboarded domain',
  ],
  [/quota|^E_DAILY_LIMIT_EXCEEDED$/, "wait for the provider's quota to reset, or ask the provider for a higher one"],
  [/^http-40[45]$/, "set RESEND_API_URL in wrangler.toml to https://api.resend.com (or your proxy's whole base URL)"],
  [
    /^http-403$/,
    "Resend's edge refused the request itself (error 1010: no User-Agent, or a blocked client): check RESEND_API_URL and that this version of notify-edge sends a User-Agent",
  ],
  [/^security_error$/, 'ask Resend support why it refused the request (451 security_error)'],
]

/** The fix of a pause with this provider code. */
export function pauseFixOf(code: string): string {
  return PAUSE_FIXES.find(([pattern]) => pattern.test(code))?.[1] ?? 'fix what the reason names'
}

/** A paused transport: nothing is sent but one probe at a time until the cause is fixed. */
export function pauseFindings(pause: PauseShown | null | undefined): Finding[] {
  if (!pause) return []
  return [
    {
      id: 'transport-paused',
      severity: 'blocker',
      message: `the ${pause.transport} transport is paused since ${pause.since} (${pause.code}): ${pause.reason}. Its notifications wait as paused; one is tried at a time, next at ${pause.probe_at}`,
      fix: `${pauseFixOf(pause.code)}; the pause ends by itself when a probe is accepted`,
    },
  ]
}
