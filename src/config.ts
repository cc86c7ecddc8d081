import { commaList } from '@notify-edge/contracts'
import { z } from 'zod'
import { CLOCK_PATTERN, Locale, TimeZone } from './contracts/fields.ts'
import { ApiError } from './errors.ts'
import { MAX_DELAY_SECONDS } from './queue/policy.ts'

const DelayList = z
  .string()
  .regex(/^\d+(,\d+)*$/, 'a comma-separated list of whole seconds, e.g. "5,30"')
  .transform((value) => value.split(',').map(Number))
  .refine(
    (delays) => delays.every((delay) => delay <= MAX_DELAY_SECONDS),
    `each delay is at most ${MAX_DELAY_SECONDS} s (the Queues limit)`,
  )

const Token = z
  .string()
  .min(16, 'at least 16 characters')
  // A bearer token is guessed offline from nothing but its form: "aaaaaaaaaaaaaaaa" is no token.
  .refine(
    (value) => new Set(value).size >= 10,
    'at least 10 different characters: a random one (openssl rand -base64 32)',
  )

const Clock = z
  .string()
  .regex(CLOCK_PATTERN, 'HH:MM, 24-hour')
  .transform((value) => Number(value.slice(0, 2)) * 60 + Number(value.slice(3)))

const UrgencyList = commaList(z.enum(['low', 'normal', 'high']))

const Seconds = z.coerce.number().int().nonnegative()

/** An email transport: the send_email binding (`cloudflare`) or Resend's HTTP API (`resend`). */
const TransportName = z.enum(['cloudflare', 'resend'])
/** The name of an email transport. */
export type TransportName = z.infer<typeof TransportName>
/** Every email transport's name. */
export const TRANSPORT_NAMES: readonly TransportName[] = TransportName.options

/** EMAIL_TRANSPORTS as a list: each a known transport, none twice; undefined when not set. */
function transportList(value: string | undefined, context: z.RefinementCtx): TransportName[] | undefined {
  if (value === undefined || value.trim() === '') return undefined
  const names = value.split(',').map((name) => name.trim())
  for (const name of names) {
    if (!TransportName.safeParse(name).success) {
      context.addIssue({ code: 'custom', message: `names an unknown transport "${name}" (cloudflare or resend)` })
      return z.NEVER
    }
  }
  if (new Set(names).size !== names.length) {
    context.addIssue({ code: 'custom', message: 'names a transport twice' })
    return z.NEVER
  }
  return names as TransportName[]
}

/** The transports mail tries, in order: EMAIL_TRANSPORTS when set, else EMAIL_TRANSPORT alone. */
function transportsOf(data: {
  EMAIL_TRANSPORT: TransportName
  EMAIL_TRANSPORTS?: TransportName[] | undefined
}): TransportName[] {
  return data.EMAIL_TRANSPORTS ?? [data.EMAIL_TRANSPORT]
}

/** The most queues notify-events may be spread over (EVENTS_QUEUE_SHARDS): 80,000 events a second. */
export const EVENTS_QUEUE_SHARDS_MAX = 16

/** The most D1 databases the recipients may be spread over (DB_SHARDS): each holds about 11 million emails a month. */
export const DB_SHARDS_MAX = 16

/** The highest send pace one Durable Object is asked to keep (see RESEND_REQUESTS_PER_SECOND). */
export const PACE_MAX_REQUESTS_PER_SECOND = 500

/** Days of retention, at least `min`. */
const RetentionDays = (min: number, fallback: number) => z.coerce.number().int().min(min).default(fallback)

/** An HMAC key: long enough that guessing it is not an attack. */
const SigningKey = z.string().min(32, 'at least 32 characters')

/** Where recipients reach this Worker: https, except on this machine (mail clients refuse plain http). */
const PublicUrl = z
  .url({ protocol: /^https?$/ })
  .refine((value) => {
    const url = new URL(value)
    return url.protocol === 'https:' || ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)
  }, 'https (plain http only for 127.0.0.1 or localhost)')
  .transform((value) => value.replace(/\/+$/, ''))

/** Every bearer token the Worker accepts, current and previous. */
export const TOKEN_NAMES = [
  'INGEST_TOKEN',
  'INGEST_TOKEN_PREVIOUS',
  'ADMIN_TOKEN',
  'ADMIN_TOKEN_PREVIOUS',
  'VIEWER_TOKEN',
  'VIEWER_TOKEN_PREVIOUS',
] as const

/** One value, one scope: a token shared by two scopes would grant the wider one. */
function distinctTokens(
  config: Partial<Record<(typeof TOKEN_NAMES)[number], string | undefined>>,
  context: z.RefinementCtx,
): void {
  const seen = new Map<string, string>()
  for (const name of TOKEN_NAMES) {
    const value = config[name]
    if (value === undefined) continue
    const other = seen.get(value)
    if (other) context.addIssue({ code: 'custom', path: [name], message: `must differ from ${other}` })
    else seen.set(value, name)
  }
}

/** Where local development runs: the only place the example secrets of .dev.vars.example are taken. */
const isLocal = (publicUrl: string | undefined) =>
  publicUrl !== undefined && ['127.0.0.1', 'localhost', '[::1]'].includes(new URL(publicUrl).hostname)

/**
 * The example secrets of .dev.vars.example say so ("change-me"): outside local
 * development (a PUBLIC_URL not on this machine) every one is refused, so a
 * deploy that copied the file answers nothing but CONFIG_INVALID — and the
 * doctor names each secret — rather than the tokens anyone can read here.
 */
function noExampleSecrets(config: Record<string, unknown> & { PUBLIC_URL?: string }, context: z.RefinementCtx): void {
  if (isLocal(config.PUBLIC_URL)) return
  for (const name of SECRET_NAMES) {
    const value = config[name]
    if (typeof value === 'string' && /change-me/i.test(value)) {
      context.addIssue({
        code: 'custom',
        path: [name],
        message: `is the example of .dev.vars.example, refused outside local development: set a random one (openssl rand -base64 32 | npx wrangler secret put ${name})`,
      })
    }
  }
}

/** Resend's answer is waited for this long by default: well beyond its usual second, a third of the default lease at most. */
export const RESEND_TIMEOUT_DEFAULT_SECONDS = 15

type LeaseAndTimeout = { DISPATCH_LEASE_SECONDS: number; RESEND_TIMEOUT_SECONDS: number }

/**
 * A send starts only while a third of its dispatch lease is left, and the
 * lease is renewed every third of it (src/dispatch/lease.ts): when renewals
 * fail, a send that started is covered only if it cannot take longer than that
 * third. Through resend it takes at most RESEND_TIMEOUT_SECONDS; a longer one
 * could outlive the lease, be taken over by another delivery and be sent by
 * both at once. Why `config` breaks that, or undefined when it does not.
 */
function leaseRefusal(config: LeaseAndTimeout): string | undefined {
  const least = 3 * config.RESEND_TIMEOUT_SECONDS
  if (config.DISPATCH_LEASE_SECONDS >= least) return undefined
  return `must be at least 3 × RESEND_TIMEOUT_SECONDS (${config.RESEND_TIMEOUT_SECONDS} s), so ≥ ${least}: a send may take that long and starts only while a third of the lease is left; raise DISPATCH_LEASE_SECONDS or lower RESEND_TIMEOUT_SECONDS`
}

function leaseOutlastsASend(config: LeaseAndTimeout, context: z.RefinementCtx): void {
  const message = leaseRefusal(config)
  if (message) context.addIssue({ code: 'custom', path: ['DISPATCH_LEASE_SECONDS'], message })
}

/**
 * Every variable and secret of the Worker. Each field's description and
 * default are what docs/configuration.md shows (generated from this schema,
 * kept equal by a test); `secret` marks what goes in with `wrangler secret put`.
 */
export const ConfigSchema = z
  .object({
    INGEST_TOKEN: Token.meta({ secret: true }).describe(
      'bearer token of the bridge; may only call ingest (≥ 16 characters)',
    ),
    ADMIN_TOKEN: Token.meta({ secret: true }).describe(
      'bearer token of operators (≥ 16 characters, different from INGEST_TOKEN)',
    ),
    VIEWER_TOKEN: Token.optional()
      .meta({ secret: true })
      .describe('bearer token of read-only operators: every GET, no change (≥ 16 characters)'),
    // Rotation without downtime: the old value goes here while the new one is rolled out to
    // every client, and is removed once none uses it.
    INGEST_TOKEN_PREVIOUS: Token.optional()
      .meta({ secret: true })
      .describe('the previous ingest token, still accepted during a rotation'),
    ADMIN_TOKEN_PREVIOUS: Token.optional()
      .meta({ secret: true })
      .describe('the previous admin token, still accepted during a rotation'),
    VIEWER_TOKEN_PREVIOUS: Token.optional()
      .meta({ secret: true })
      .describe('the previous viewer token, still accepted during a rotation'),
    RETRY_DELAYS_SECONDS: DelayList.prefault('5,30').describe(
      'delays before attempts 2, 3, … of an event; the attempt after the last one is dead-lettered',
    ),
    // Longer than the event policy: an email provider's transient failures (rate limits, 5xx)
    // last, and every attempt is safe (the claim, the Message-ID and the provider's idempotency key).
    DISPATCH_RETRY_DELAYS_SECONDS: DelayList.prefault('5,30,60,120,300,600,900,1800,3600').describe(
      'delays between send attempts of one notification (10 attempts), then `failed` and a dead letter',
    ),
    // Queues take 5,000 messages a second per queue (src/platform-limits.ts): past that, more than one.
    EVENTS_QUEUE_SHARDS: z.coerce
      .number()
      .int()
      .min(1)
      .max(EVENTS_QUEUE_SHARDS_MAX)
      .default(1)
      .describe(
        'queues notify-events is spread over, each taking up to 5,000 events a second: notify-events, notify-events-1, … bound as EVENTS, EVENTS_1, …, each with its own consumer (1–16)',
      ),
    // One D1 database holds about 11 million emails a month at the default retention (docs/scaling.md):
    // past that, the recipients are spread over more (src/d1/shards.ts).
    DB_SHARDS: z.coerce
      .number()
      .int()
      .min(1)
      .max(DB_SHARDS_MAX)
      .default(1)
      .describe(
        "D1 databases the recipients are spread over, each holding its recipients' notifications, contacts, preferences and suppressions: DB, DB_1, … (1–16)",
      ),
    // Growing the shards moves rows between databases while nothing else writes them (src/shards/grow.ts).
    DB_SHARDS_GROWING_TO: z.coerce
      .number()
      .int()
      .min(0)
      .max(DB_SHARDS_MAX)
      .default(0)
      .describe(
        'twice DB_SHARDS while the shards are growing (docs/scaling.md): the cron and the consumers hold, operator changes answer 503, and POST /v1/shards/grow moves each recipient to their new shard; 0 otherwise',
      ),
    PROCESSED_EVENTS_RETENTION_DAYS: z.coerce
      .number()
      .int()
      .min(7)
      .default(7)
      .describe('how long processed-event keys are kept for deduplication (≥ 7)'),
    // Retention per kind of data (src/maintenance/retention.ts). Each is pruned by the cron, a
    // bounded chunk a minute, so that the database stays far from D1's size limit, where every write fails.
    NOTIFICATION_CONTENT_RETENTION_DAYS: RetentionDays(7, 7).describe(
      'days after it ended (its last change) that a final notification keeps its content — recipient snapshot, subject, bodies, unsubscribe link; the row (ids, kind, status, times) stays until NOTIFICATION_RETENTION_DAYS (≥ 7)',
    ),
    NOTIFICATION_RETENTION_DAYS: z.coerce
      .number()
      .int()
      .min(7)
      .optional()
      .describe(
        "days after it ended that a final notification's row is kept (an event's story), then deleted with its delivery events; at least NOTIFICATION_CONTENT_RETENTION_DAYS, which it is when unset (≥ 7)",
      ),
    INBOX_RETENTION_DAYS: RetentionDays(1, 7).describe(
      'days an item stays in its recipient’s in-app feed after it arrived, read or not; at most NOTIFICATION_CONTENT_RETENTION_DAYS (≥ 1)',
    ),
    SENT_MESSAGE_RETENTION_DAYS: RetentionDays(0, 0).describe(
      "days the exact MIME of a sent message is kept in D1 (the largest rows: 0, the default, keeps none); at most the notification row's retention (≥ 0)",
    ),
    DELIVERY_EVENT_RETENTION_DAYS: RetentionDays(7, 7).describe(
      "days a provider delivery event that matched no notification is kept; the others go with their notification's row (NOTIFICATION_RETENTION_DAYS); suppressions they caused stay (≥ 7)",
    ),
    DEAD_LETTER_RETENTION_DAYS: RetentionDays(1, 30).describe(
      'days a replayed or discarded dead letter is kept after it was resolved; open ones wait for an operator however old (≥ 1)',
    ),
    // The audit trail's delete trigger refuses any row younger than 364 days (migration 0010), so
    // a shorter retention could only fail.
    AUDIT_RETENTION_DAYS: RetentionDays(365, 365).describe('days an audit row is kept (≥ 365)'),
    RETENTION_CHUNK_ROWS: z.coerce
      .number()
      .int()
      .min(1)
      .max(5000)
      .default(1000)
      .describe('rows one retention statement prunes, oldest first (≤ 5000)'),
    RETENTION_MAX_CHUNKS: z.coerce
      .number()
      .int()
      .min(1)
      .max(50)
      .default(20)
      .describe(
        'chunks the cron prunes per table per run (every minute) while each comes back full: a backlog drains at up to RETENTION_CHUNK_ROWS × this a minute (≤ 50)',
      ),
    LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info').describe('lowest level logged'),
    DEFAULT_LOCALE: Locale.default('ru').describe(
      'last step of the template locale fallback (ru-RU → ru → DEFAULT_LOCALE)',
    ),
    DEFAULT_TIME_ZONE: TimeZone.default('Europe/Moscow').describe(
      'time zone of a recipient without one in the contact replica',
    ),
    QUIET_HOURS_START: Clock.prefault('22:00').describe("start of quiet hours, recipient's local time (HH:MM)"),
    QUIET_HOURS_END: Clock.prefault('08:00').describe("end of quiet hours, recipient's local time (HH:MM)"),
    QUIET_HOURS_URGENCIES: UrgencyList.prefault('low').describe('urgencies held during quiet hours (comma-separated)'),
    DIGEST_WINDOW_SECONDS: z.coerce
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        "when set, every digest closes this many seconds after it opened, whatever its kind's schedule (tests, demos, local runs)",
      ),
    ESCALATION_AFTER_SECONDS: z.coerce
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        "when set, an email that waits for its in-app item waits this many seconds, whatever its kind's escalation says (tests, demos, local runs)",
      ),
    DIGEST_MAX_ITEMS: z.coerce
      .number()
      .int()
      .min(1)
      .max(500)
      .default(50)
      .describe('notifications a digest email lists, oldest first; `count` still says how many there were (≤ 500)'),
    FALLBACK_GRACE_SECONDS: Seconds.default(600).describe(
      'how long a fallback decision (from person-upserted) waits for the authoritative one',
    ),
    DECISION_MATCH_SECONDS: Seconds.default(300).describe(
      'a fallback decision without a request id matches the authoritative decision of the same person made within this many seconds of it; one further apart is a new decision',
    ),
    IDEMPOTENCY_TTL_DAYS: z.coerce
      .number()
      .int()
      .min(7)
      .default(8)
      .describe('KV fast-path TTL of processed keys, in days (≥ 7)'),
    EMAIL_TRANSPORT: TransportName.default('cloudflare').describe(
      '`cloudflare` (the send_email binding) or `resend` (its HTTP API); EMAIL_TRANSPORTS, when set, takes its place',
    ),
    EMAIL_TRANSPORTS: z
      .string()
      .optional()
      .transform((value, context) => transportList(value, context))
      .describe(
        'the email transports in order, comma-separated (`cloudflare,resend` or `resend,cloudflare`): mail goes through the first that is not paused and whose circuit is closed, and fails over to the next only when the first certainly did not send (docs/operating.md, "Provider failover"); one entry behaves as EMAIL_TRANSPORT',
      ),
    CIRCUIT_FAILURES: z.coerce
      .number()
      .int()
      .min(2)
      .max(100)
      .default(5)
      .describe(
        'consecutive failures of one transport that the provider may be down for (a 5xx, no answer, an internal error) that open its circuit, sending new mail through the next transport; only with more than one in EMAIL_TRANSPORTS',
      ),
    EMAIL_FROM: z.email().describe('envelope and header sender address'),
    EMAIL_FROM_NAME: z.string().min(1).default('notify-edge').describe('display name of the sender'),
    RESEND_API_KEY: z
      .string()
      .min(1)
      .optional()
      .meta({ secret: true })
      .describe('Resend API key; required when EMAIL_TRANSPORT is resend'),
    RESEND_API_URL: z
      .url({ protocol: /^https?$/ })
      .default('https://api.resend.com')
      .describe('Resend API base URL'),
    // https://resend.com/docs/api-reference/emails/send-batch-emails: "up to 100 batch emails at once".
    RESEND_BATCH_SIZE: z.coerce
      .number()
      .int()
      .min(1)
      .max(100)
      .default(100)
      .describe(
        'emails per Resend request: the notifications one dispatch batch claims go out in `POST /emails/batch` requests of up to this many (1: one `POST /emails` each) (≤ 100)',
      ),
    // One Durable Object paces every send of the account (src/dispatch/pace/), and an object has a
    // soft limit of 1,000 requests per second: each send asks it once, some twice, hence the ceiling.
    RESEND_REQUESTS_PER_SECOND: z.coerce
      .number()
      .int()
      .min(1)
      .max(PACE_MAX_REQUESTS_PER_SECOND)
      .default(5)
      .describe(
        "Resend's rate limit of the team behind RESEND_API_KEY, in requests per second (5 by default, raised on request): sends through resend are paced to it across every consumer invocation; a lower `ratelimit-limit` in Resend's answers lowers the pace by itself (≤ 500)",
      ),
    // A request Resend does not answer in time may still have been taken: its retry goes under the
    // same idempotency key, and Resend answers it with the first answer (src/dispatch/transports/resend.ts).
    RESEND_TIMEOUT_SECONDS: z.coerce
      .number()
      .int()
      .min(1)
      .default(RESEND_TIMEOUT_DEFAULT_SECONDS)
      .describe(
        'how long a request to Resend may take before the send counts as a transient failure; at most a third of DISPATCH_LEASE_SECONDS',
      ),
    // Resend answers a retry under a key it has seen with its first answer for 24 hours, then forgets the
    // key and sends again (https://resend.com/docs/dashboard/emails/idempotency-keys).
    RESEND_IDEMPOTENCY_WINDOW_HOURS: z.coerce
      .number()
      .int()
      .min(2)
      .max(24 * 30)
      .default(24)
      .describe(
        "how long Resend keeps an idempotency key (its documented 24 h): a retry of a send that may have gone out is sent only up to an hour before this has passed since its first try; later it waits for Resend's delivery events like an unknown outcome, and becomes a dead letter (NTF_SEND_UNKNOWN) if none comes (≥ 2)",
      ),
    DISPATCH_LEASE_SECONDS: Seconds.min(3)
      .default(120)
      .describe(
        'how long a dispatch claim is held before another delivery may take it (≥ 3, and ≥ 3 × RESEND_TIMEOUT_SECONDS); renewed every third of it while the send runs',
      ),
    CONTACT_WAIT_HOURS: z.coerce
      .number()
      .positive()
      .max(24 * 14)
      .default(24)
      .describe(
        'how long a notification waits for its recipient to appear in the contact replica before it becomes a dead letter (NTF_CONTACT_NOT_FOUND)',
      ),
    UNKNOWN_OUTCOME_SECONDS: Seconds.min(60)
      .default(600)
      .describe(
        'how long a send whose outcome is unknown waits for a delivery event: through a transport without an idempotency key (cloudflare) it is sent again after that; through resend, past its idempotency window, it becomes a dead letter (NTF_SEND_UNKNOWN); one that may have gone out through a transport that is paused or whose circuit is open, while another of EMAIL_TRANSPORTS is usable, goes through that other one after it',
      ),
    STUCK_GRACE_SECONDS: Seconds.default(120).describe(
      'how far past due a pending notification must be before the cron re-enqueues it',
    ),
    TEMPLATE_PARSE_LIMIT: z.coerce
      .number()
      .int()
      .min(1000)
      .default(200_000)
      .describe('characters of Liquid source parsed per template part'),
    // Checked between template nodes. Deployed on Cloudflare the clock advances only on I/O, so a
    // render (no I/O) never sees it move: there TEMPLATE_RENDER_STEPS is the render limit that binds.
    TEMPLATE_RENDER_LIMIT_MS: z.coerce
      .number()
      .int()
      .min(10)
      .default(500)
      .describe(
        'milliseconds of rendering per template part, where the clock moves while code runs (locally; deployed, TEMPLATE_RENDER_STEPS binds)',
      ),
    // The default templates need about 20 nodes a part, their digest about 17 an item (8500 at the
    // largest DIGEST_MAX_ITEMS, 500): 20000 holds them, and bounds a runaway loop to ~0.1 s of CPU.
    TEMPLATE_RENDER_STEPS: z.coerce
      .number()
      .int()
      .min(1000)
      .default(20_000)
      .describe(
        'template nodes rendered per template part (tags, outputs and text, counted each time a loop repeats them): the render limit that holds deployed',
      ),
    TEMPLATE_MEMORY_LIMIT: z.coerce
      .number()
      .int()
      .min(10_000)
      .default(1_000_000)
      .describe('allocation units per template part: loop iterations, range elements, strings built by filters'),
    // The notification row (three parts) and the raw MIME kept beside it must stay well inside D1's 2 MB row.
    TEMPLATE_OUTPUT_LIMIT_BYTES: z.coerce
      .number()
      .int()
      .min(10_000)
      .max(400_000)
      .default(200_000)
      .describe('UTF-8 bytes of a rendered text or HTML part (≤ 400000)'),
    PUBLIC_URL: PublicUrl.describe(
      'the base URL recipients reach this Worker at; one-click unsubscribe links are `{PUBLIC_URL}/u/{token}`',
    ),
    UNSUBSCRIBE_SIGNING_KEY: SigningKey.meta({ secret: true }).describe(
      'HMAC key of unsubscribe links (≥ 32 characters)',
    ),
    // Rotation: put the old key here and a new one above; links signed with either keep working.
    UNSUBSCRIBE_SIGNING_KEY_PREVIOUS: SigningKey.optional()
      .meta({ secret: true })
      .describe('the key before the last rotation: links it signed are still honoured'),
    CONSOLE_SESSION_KEY: SigningKey.optional()
      .meta({ secret: true })
      .describe('HMAC key of the console’s session cookies (≥ 32 characters); without it the console is closed'),
    CONSOLE_SESSION_KEY_PREVIOUS: SigningKey.optional()
      .meta({ secret: true })
      .describe('the previous session key, still accepted during a rotation'),
    // The host application signs its users' inbox tokens with it (src/inbox/token.ts); rotate like the
    // unsubscribe key: the old value here, a new one above.
    INBOX_TOKEN_SECRET: SigningKey.optional()
      .meta({ secret: true })
      .describe(
        'HMAC key (HS256) the host application signs its users’ inbox tokens with (≥ 32 characters); without it the in-app inbox refuses every token',
      ),
    INBOX_TOKEN_SECRET_PREVIOUS: SigningKey.optional()
      .meta({ secret: true })
      .describe('the previous inbox token key, still accepted during a rotation (only beside INBOX_TOKEN_SECRET)'),
    INBOX_ALLOWED_ORIGINS: commaList(
      z
        .string()
        .regex(/^https?:\/\/[^/\s]+$/, 'an origin: scheme and host (and port), no path, e.g. https://app.example.com'),
    )
      .optional()
      .describe(
        'the origins of the host application’s pages that call the inbox routes from the browser (CORS); without it only the Worker’s own origin may',
      ),
    CONSOLE_SESSION_HOURS: Seconds.min(1)
      .max(24 * 30)
      .default(8)
      .describe('the longest a console session lasts from its sign-in, however much it is used'),
    CONSOLE_SESSION_IDLE_MINUTES: z.coerce
      .number()
      .int()
      .min(5)
      .max(24 * 60)
      .default(30)
      .describe('how long a console session lasts unused: each page renews it, up to CONSOLE_SESSION_HOURS'),
    ACCESS_TEAM_DOMAIN: z
      .string()
      .regex(/^[a-z0-9-]+\.cloudflareaccess\.com$/, 'your team domain, e.g. acme.cloudflareaccess.com')
      .optional()
      .describe('Cloudflare Access team domain: with ACCESS_AUD, console users are who Access says they are'),
    ACCESS_AUD: z.string().min(16).optional().describe('the Application Audience (AUD) tag of the console in Access'),
    ACCESS_ADMINS: commaList(z.email())
      .optional()
      .describe('e-mails of Access users who may change things in the console; every other Access user only views'),
    RESEND_WEBHOOK_SECRET: z
      .string()
      .regex(/^whsec_[A-Za-z0-9+/=]+$/, 'the `whsec_…` signing secret Resend shows for the webhook')
      .optional()
      .meta({ secret: true })
      .describe('signing secret of the Resend webhook; POST /v1/webhooks/resend refuses everything without it'),
    // Not a rotation key: the pseudonyms of erased addresses are made with it, and a pseudonym made
    // with another key never matches again. Without it the unsubscribe key is used, which is why
    // that key's rotation says to copy its value here first.
    ERASURE_HASH_KEY: SigningKey.optional()
      .meta({ secret: true })
      .describe(
        'HMAC key of the pseudonym that replaces an erased address (suppression list, audit trail); defaults to UNSUBSCRIBE_SIGNING_KEY. Never change it once an address was erased (≥ 32 characters)',
      ),
    SUPPRESSION_SOFT_BOUNCE_HOURS: Seconds.min(1)
      .default(24)
      .describe('how long a soft bounce (temporary failures the provider gave up on) suppresses an address'),
    SUPPRESSION_PROVIDER_DAYS: Seconds.min(1)
      .default(7)
      .describe(
        "how long an address the provider itself refused as suppressed stays on this Worker's list (the provider keeps its own)",
      ),
  })
  .superRefine(distinctTokens)
  .refine(
    (config) =>
      config.INBOX_TOKEN_SECRET_PREVIOUS === undefined ||
      config.INBOX_TOKEN_SECRET_PREVIOUS !== config.INBOX_TOKEN_SECRET,
    { path: ['INBOX_TOKEN_SECRET_PREVIOUS'], message: 'must differ from INBOX_TOKEN_SECRET' },
  )
  .refine((config) => config.UNSUBSCRIBE_SIGNING_KEY !== config.UNSUBSCRIBE_SIGNING_KEY_PREVIOUS, {
    path: ['UNSUBSCRIBE_SIGNING_KEY_PREVIOUS'],
    message: 'must differ from UNSUBSCRIBE_SIGNING_KEY',
  })
  .refine((config) => !transportsOf(config).includes('resend') || config.RESEND_API_KEY !== undefined, {
    path: ['RESEND_API_KEY'],
    message: 'is required when EMAIL_TRANSPORT is resend or EMAIL_TRANSPORTS names it',
  })
  // With failover, an email whose answer from Resend was lost waits for Resend's events before the other
  // transport sends it: without the webhook none can come, and every such email would go out twice.
  .refine(
    (config) =>
      !(transportsOf(config).includes('resend') && transportsOf(config).length > 1) ||
      config.RESEND_WEBHOOK_SECRET !== undefined,
    {
      path: ['RESEND_WEBHOOK_SECRET'],
      message:
        "is required when EMAIL_TRANSPORTS names resend and another transport: a lost answer waits for Resend's delivery events before the other transport sends it",
    },
  )
  .superRefine(leaseOutlastsASend)
  .refine((config) => config.DB_SHARDS_GROWING_TO === 0 || config.DB_SHARDS_GROWING_TO === 2 * config.DB_SHARDS, {
    path: ['DB_SHARDS_GROWING_TO'],
    // Doubling moves rows only into the new, empty databases: each bucket stays or moves up by DB_SHARDS.
    message: 'is 0, or twice DB_SHARDS (shards grow by doubling)',
  })
  .refine((config) => config.INBOX_RETENTION_DAYS <= config.NOTIFICATION_CONTENT_RETENTION_DAYS, {
    path: ['INBOX_RETENTION_DAYS'],
    // An erasure by address finds the person's user id through the addresses their notifications keep only
    // that long (src/erasure/erase.ts): a feed kept longer could outlive what finds it.
    message: 'must be at most NOTIFICATION_CONTENT_RETENTION_DAYS',
  })
  .refine(
    (config) =>
      (config.NOTIFICATION_RETENTION_DAYS ?? config.NOTIFICATION_CONTENT_RETENTION_DAYS) >=
      config.NOTIFICATION_CONTENT_RETENTION_DAYS,
    {
      path: ['NOTIFICATION_RETENTION_DAYS'],
      // Only a notification whose content is gone is deleted (src/notifications/prune.ts).
      message: 'must be at least NOTIFICATION_CONTENT_RETENTION_DAYS',
    },
  )
  .refine(
    (config) =>
      config.SENT_MESSAGE_RETENTION_DAYS <=
      (config.NOTIFICATION_RETENTION_DAYS ?? config.NOTIFICATION_CONTENT_RETENTION_DAYS),
    {
      path: ['SENT_MESSAGE_RETENTION_DAYS'],
      // An exact message goes with its notification's row at the latest, where erasure still finds it.
      message: "must be at most the notification row's retention (NOTIFICATION_RETENTION_DAYS)",
    },
  )
  .superRefine((config, context) => noExampleSecrets(config, context))

/**
 * How much one template may cost (the TEMPLATE_* variables). A template that
 * needs more fails with the limit it broke: a 400 when it is saved or
 * previewed, `NTF_TEMPLATE_INVALID` for the one event that makes it expensive.
 */
export type TemplateLimits = {
  /** Characters of Liquid source parsed per part (LiquidJS `parseLimit`). */
  parseChars: number
  /** Milliseconds of rendering per part (LiquidJS `renderLimit`; see TEMPLATE_RENDER_LIMIT_MS in docs/configuration.md). */
  renderMs: number
  /** Template nodes rendered per part — tags, outputs and text, counted each time a loop repeats them: the render limit that holds where the clock stands still. */
  steps: number
  /** Allocation units per part: loop iterations, range sizes, strings built by filters (LiquidJS `memoryLimit`, plus loops). */
  memory: number
  /** UTF-8 bytes of a rendered text or HTML part; the subject holds at most SUBJECT_MAX_CHARS. */
  outputBytes: number
  /** Set on the limits of a preview or a save (`previewLimits`), so that an error names the share it broke. */
  preview?: true
}

/** The Worker's configuration, parsed from its variables and secrets. */
export type Config = z.infer<typeof ConfigSchema> & {
  /** Attempts before a retryable failure is dead-lettered: one more than the delays. */
  maxAttempts: number
  /** The TEMPLATE_* limits, as the renderer takes them. */
  templateLimits: TemplateLimits
  /** The key of erased addresses' pseudonyms (src/erasure/pseudonym.ts): ERASURE_HASH_KEY, else UNSUBSCRIBE_SIGNING_KEY. */
  erasureKey: string
  /** Days a final notification's row is kept after it ended: NOTIFICATION_RETENTION_DAYS, else its content's. */
  notificationRetentionDays: number
  /** The email transports in the order mail tries them: EMAIL_TRANSPORTS, else EMAIL_TRANSPORT alone. */
  transports: readonly TransportName[]
}

/** The names of the secrets (`wrangler secret put`), as the schema marks them. */
export const SECRET_NAMES: readonly string[] = Object.entries(ConfigSchema.shape)
  .filter(([, field]) => z.globalRegistry.get(field)?.secret === true)
  .map(([name]) => name)

/** A variable the schema refuses, and why. */
export type ConfigIssue = { variable: string; message: string }

const issuesOf = (error: z.ZodError): ConfigIssue[] =>
  error.issues.map((issue) => ({ variable: issue.path.join('.'), message: issue.message }))

/**
 * What the schema refuses of `values`, one entry per issue. `present` checks
 * only the variables that are set, each on its own, and the dispatch lease
 * against the Resend timeout: a wrangler.toml, which holds no secrets, is
 * judged by what it does hold.
 */
export function configIssues(values: Record<string, unknown>, scope: 'all' | 'present' = 'all'): ConfigIssue[] {
  if (scope === 'all') {
    const result = ConfigSchema.safeParse(values)
    return result.success ? [] : issuesOf(result.error)
  }
  const alone = Object.entries(ConfigSchema.shape).flatMap(([name, field]) => {
    if (values[name] === undefined) return []
    const result = field.safeParse(values[name])
    return result.success ? [] : issuesOf(result.error).map((issue) => ({ ...issue, variable: name }))
  })
  // The one rule between variables that a file of variables alone can break: the lease and the
  // timeout (each at its default when not set).
  const lease = ConfigSchema.shape.DISPATCH_LEASE_SECONDS.safeParse(values.DISPATCH_LEASE_SECONDS)
  const timeout = ConfigSchema.shape.RESEND_TIMEOUT_SECONDS.safeParse(values.RESEND_TIMEOUT_SECONDS)
  const message =
    lease.success && timeout.success
      ? leaseRefusal({ DISPATCH_LEASE_SECONDS: lease.data, RESEND_TIMEOUT_SECONDS: timeout.data })
      : undefined
  return message ? [...alone, { variable: 'DISPATCH_LEASE_SECONDS', message }] : alone
}

const TokensSchema = z
  .object(Object.fromEntries(TOKEN_NAMES.map((name) => [name, ConfigSchema.shape[name]])))
  .superRefine(distinctTokens)

/**
 * The bearer tokens alone, for the one route that must answer while the rest
 * of the configuration is broken, since it reports what is broken
 * (`GET /v1/health/config`). Fails like `configOf` when a token is bad.
 */
export function tokensOf(env: object): Pick<Config, (typeof TOKEN_NAMES)[number]> {
  const result = TokensSchema.safeParse(env)
  if (!result.success) throw invalid(issuesOf(result.error))
  return result.data as Pick<Config, (typeof TOKEN_NAMES)[number]>
}

const invalid = (issues: ConfigIssue[]) =>
  new ApiError(
    'CONFIG_INVALID',
    `Worker configuration is invalid: ${issues.map((issue) => `${issue.variable} (${issue.message})`).join(', ')}`,
  )

const parsed = new WeakMap<object, Config>()
/** An env derived from another (`withBindings`) → the env its configuration is parsed from. */
const derivedFrom = new WeakMap<object, object>()

/**
 * `env` with some bindings replaced (the metered ones of src/metrics/invocation.ts).
 * It shares `env`'s parsed configuration: a new env object per invocation must
 * not mean parsing every variable again with zod.
 */
export function withBindings<E extends object>(env: E, bindings: Partial<E>): E {
  // A proxy, not a copy: spreading the runtime's env reads every binding and variable, per invocation.
  const derived = new Proxy(env, {
    get: (target, property) =>
      Object.hasOwn(bindings, property) ? bindings[property as keyof E] : Reflect.get(target, property),
  })
  derivedFrom.set(derived, derivedFrom.get(env) ?? env)
  return derived
}

/**
 * Parses the Worker's variables once per `env` object and fails with a message
 * naming each bad variable (`CONFIG_INVALID`). Typed `object`, not `Env`, so
 * that Node scripts (the generated configuration docs) can import this module.
 */
export function configOf(env: object): Config {
  const source = derivedFrom.get(env) ?? env
  const cached = parsed.get(source)
  if (cached) return cached
  const result = ConfigSchema.safeParse(source)
  if (!result.success) throw invalid(issuesOf(result.error))
  const data = result.data
  const config = {
    ...data,
    maxAttempts: data.RETRY_DELAYS_SECONDS.length + 1,
    templateLimits: {
      parseChars: data.TEMPLATE_PARSE_LIMIT,
      renderMs: data.TEMPLATE_RENDER_LIMIT_MS,
      steps: data.TEMPLATE_RENDER_STEPS,
      memory: data.TEMPLATE_MEMORY_LIMIT,
      outputBytes: data.TEMPLATE_OUTPUT_LIMIT_BYTES,
    },
    erasureKey: data.ERASURE_HASH_KEY ?? data.UNSUBSCRIBE_SIGNING_KEY,
    transports: transportsOf(data),
    notificationRetentionDays: data.NOTIFICATION_RETENTION_DAYS ?? data.NOTIFICATION_CONTENT_RETENTION_DAYS,
  }
  parsed.set(source, config)
  return config
}
