/**
 * What each configured transport needs to send and to hear back: its
 * secrets, no pause nor open circuit, and a way for delivery events to come
 * back.
 */
import { TRANSPORT_NAMES, type TransportName } from '../config.ts'
import { CIRCUIT_OPEN_CODE, carrierOf, type Provider, providersOf } from './providers.ts'
import type { Deployment, Finding } from './types.ts'

/**
 * The configured transports in the order mail tries them: EMAIL_TRANSPORTS
 * when it names any, else EMAIL_TRANSPORT (the schema's default when unset).
 * A name the schema refuses is left out here: `config-invalid` names it.
 */
export function transportsOf(deployment: Pick<Deployment, 'vars'>): TransportName[] {
  const listed = (deployment.vars.EMAIL_TRANSPORTS ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name): name is TransportName => (TRANSPORT_NAMES as readonly string[]).includes(name))
  if (listed.length > 0) return [...new Set(listed)]
  return [deployment.vars.EMAIL_TRANSPORT === 'resend' ? 'resend' : 'cloudflare']
}

/** How the configuration names a transport: `EMAIL_TRANSPORT is resend`, or `EMAIL_TRANSPORTS names resend`. */
function configuredAs(deployment: Pick<Deployment, 'vars'>, transport: TransportName): string {
  return deployment.vars.EMAIL_TRANSPORTS?.trim()
    ? `EMAIL_TRANSPORTS names ${transport}`
    : `EMAIL_TRANSPORT is ${transport}`
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
  if (!transportsOf(deployment).includes('resend')) return findings
  if (!secrets.includes('RESEND_API_KEY')) {
    findings.push({
      id: 'resend-key-missing',
      severity: 'blocker',
      message: `${configuredAs(deployment, 'resend')} and RESEND_API_KEY is not set: the configuration refuses it, so nothing can be sent`,
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
  if (!transportsOf(deployment).includes('cloudflare')) return []
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

/**
 * What the configured transports are doing, from the pauses the Worker read;
 * undefined where they cannot be seen (a wrangler.toml, a database it could
 * not read).
 */
export function providersOfDeployment(deployment: Deployment): Provider[] | undefined {
  return deployment.pauses ? providersOf(transportsOf(deployment), deployment.pauses) : undefined
}

/**
 * Each configured transport that cannot send: paused (a refusal about our
 * configuration, `transport-paused`) or its circuit open (failures that say
 * the provider may be down, `transport-circuit-open`). A blocker when no
 * transport can send; while another carries the mail, a warning.
 */
export function pauseFindings(deployment: Deployment): Finding[] {
  const providers = providersOfDeployment(deployment) ?? []
  const carrier = carrierOf(providers)
  const meanwhile = carrier
    ? `Mail goes through ${carrier} meanwhile`
    : providers.length > 1
      ? 'No configured transport can send: notifications wait as paused'
      : 'Its notifications wait as paused'
  return providers.flatMap(({ transport, pause }): Finding[] => {
    if (!pause) return []
    const severity = carrier ? 'warning' : 'blocker'
    const next = `${meanwhile}; one is tried through it at a time, next at ${pause.probe_at}`
    return [
      pause.code === CIRCUIT_OPEN_CODE
        ? {
            id: 'transport-circuit-open',
            severity,
            message: `the ${transport} transport's circuit is open since ${pause.since}: ${pause.reason}. ${next}`,
            fix: `check whether ${transport} is down (the provider's status page); the circuit closes by itself when a try through it is accepted (docs/operating.md, "Provider failover")`,
          }
        : {
            id: 'transport-paused',
            severity,
            message: `the ${transport} transport is paused since ${pause.since} (${pause.code}): ${pause.reason}. ${next}`,
            fix: `${pauseFixOf(pause.code)}; the pause ends by itself when a probe is accepted`,
          },
    ]
  })
}
