import { commaList } from '@notify-edge/contracts'
import { z } from 'zod'
import { Locale, TimeZone } from './contracts/fields.ts'
import { ApiError } from './errors.ts'
import type { TemplateLimits } from './templates/render.ts'

const DelayList = z
  .string()
  .regex(/^\d+(,\d+)*$/, 'a comma-separated list of whole seconds, e.g. "5,30"')
  .transform((value) => value.split(',').map(Number))
  .refine((delays) => delays.every((delay) => delay <= 43_200), 'each delay is at most 43200 s (the Queues limit)')

const Token = z.string().min(16, 'at least 16 characters')

const Clock = z
  .string()
  .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'HH:MM, 24-hour')
  .transform((value) => Number(value.slice(0, 2)) * 60 + Number(value.slice(3)))

const UrgencyList = commaList(z.enum(['low', 'normal', 'high']))

const Seconds = z.coerce.number().int().nonnegative()

const ConfigSchema = z
  .object({
    INGEST_TOKEN: Token,
    ADMIN_TOKEN: Token,
    /** Delays before attempts 2, 3, …; after the last one the message is dead-lettered. @defaultValue "5,30" */
    RETRY_DELAYS_SECONDS: DelayList.default([5, 30]),
    /**
     * Delays between send attempts of one notification. Longer than the event policy: an
     * email provider's transient failures (rate limits, 5xx) last, and every attempt is
     * safe (the claim, the Message-ID and the provider's idempotency key).
     * @defaultValue "5,30,60,120,300,600,900,1800,3600" (10 attempts)
     */
    DISPATCH_RETRY_DELAYS_SECONDS: DelayList.default([5, 30, 60, 120, 300, 600, 900, 1800, 3600]),
    /** How long processed-event keys are kept for deduplication. @defaultValue 30 */
    PROCESSED_EVENTS_RETENTION_DAYS: z.coerce.number().int().min(7).default(30),
    LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
    /** Last step of the template locale fallback (`ru-RU → ru → DEFAULT_LOCALE`). @defaultValue "ru" */
    DEFAULT_LOCALE: Locale.default('ru'),
    /** Time zone of a recipient without one in the contact replica. @defaultValue "Europe/Moscow" */
    DEFAULT_TIME_ZONE: TimeZone.default('Europe/Moscow'),
    /** Start of quiet hours, recipient's local time. @defaultValue "22:00" */
    QUIET_HOURS_START: Clock.default(22 * 60),
    /** End of quiet hours, recipient's local time. @defaultValue "08:00" */
    QUIET_HOURS_END: Clock.default(8 * 60),
    /** Urgencies held during quiet hours (comma-separated). @defaultValue "low" */
    QUIET_HOURS_URGENCIES: UrgencyList.default(['low']),
    /** How long a fallback decision (from person-upserted) waits for the authoritative one. @defaultValue 600 */
    FALLBACK_GRACE_SECONDS: Seconds.default(600),
    /**
     * A fallback decision that names no request matches the authoritative decision of the same
     * person made within this many seconds of it (event times); a decision further apart is a
     * new one and is notified. @defaultValue 300
     */
    DECISION_MATCH_SECONDS: Seconds.default(300),
    /** KV idempotency fast-path TTL in days. @defaultValue 8 */
    IDEMPOTENCY_TTL_DAYS: z.coerce.number().int().min(7).default(8),
    /** `cloudflare` (send_email binding) or `resend` (HTTP API). @defaultValue "cloudflare" */
    EMAIL_TRANSPORT: z.enum(['cloudflare', 'resend']).default('cloudflare'),
    /** Envelope and header sender address. */
    EMAIL_FROM: z.email(),
    /** Display name of the sender. @defaultValue "notify-edge" */
    EMAIL_FROM_NAME: z.string().min(1).default('notify-edge'),
    /** Resend API key (secret); required when EMAIL_TRANSPORT is resend. */
    RESEND_API_KEY: z.string().min(1).optional(),
    /** Resend API base URL. @defaultValue "https://api.resend.com" */
    RESEND_API_URL: z.url({ protocol: /^https?$/ }).default('https://api.resend.com'),
    /**
     * How long a dispatch claim (`sending`) is held before another delivery may take it; renewed
     * every third of it while the send runs, so it runs out only when its Worker invocation is gone.
     * @defaultValue 120
     */
    DISPATCH_LEASE_SECONDS: Seconds.min(3).default(120),
    /** How far past due a pending notification must be before the cron re-enqueues it. @defaultValue 120 */
    STUCK_GRACE_SECONDS: Seconds.default(120),
    /** Characters of Liquid source parsed per template part. @defaultValue 200000 */
    TEMPLATE_PARSE_LIMIT: z.coerce.number().int().min(1000).default(200_000),
    /**
     * Milliseconds of rendering per template part, checked between template nodes. Deployed on
     * Cloudflare the clock advances only on I/O, so a render (no I/O) never sees it move: there
     * the memory and output limits are what stop a runaway template; locally it applies.
     * @defaultValue 500
     */
    TEMPLATE_RENDER_LIMIT_MS: z.coerce.number().int().min(10).default(500),
    /** Allocation units per template part: loop iterations, range sizes, strings built by filters. @defaultValue 1000000 */
    TEMPLATE_MEMORY_LIMIT: z.coerce.number().int().min(10_000).default(1_000_000),
    /**
     * UTF-8 bytes of a rendered text or HTML part: the notification row (three parts) and the
     * raw MIME kept beside it must stay well inside D1's 2 MB row. @defaultValue 200000
     */
    TEMPLATE_OUTPUT_LIMIT_BYTES: z.coerce.number().int().min(10_000).max(400_000).default(200_000),
  })
  .refine((config) => config.INGEST_TOKEN !== config.ADMIN_TOKEN, {
    path: ['ADMIN_TOKEN'],
    message: 'must differ from INGEST_TOKEN, or the ingest token would grant admin',
  })
  .refine((config) => config.EMAIL_TRANSPORT !== 'resend' || config.RESEND_API_KEY !== undefined, {
    path: ['RESEND_API_KEY'],
    message: 'is required when EMAIL_TRANSPORT is resend',
  })

/** The Worker's configuration, parsed from its variables and secrets. */
export type Config = z.infer<typeof ConfigSchema> & {
  /** Attempts before a retryable failure is dead-lettered: one more than the delays. */
  maxAttempts: number
  /** The TEMPLATE_* limits, as the renderer takes them. */
  templateLimits: TemplateLimits
}

const parsed = new WeakMap<object, Config>()

/**
 * Parses the Worker's variables once per `env` object and fails with a message
 * naming each bad variable (`CONFIG_INVALID`).
 */
export function configOf(env: Env): Config {
  const cached = parsed.get(env)
  if (cached) return cached
  const result = ConfigSchema.safeParse(env)
  if (!result.success) {
    const names = result.error.issues.map((issue) => `${issue.path.join('.')} (${issue.message})`).join(', ')
    throw new ApiError('CONFIG_INVALID', `Worker configuration is invalid: ${names}`)
  }
  const data = result.data
  const config = {
    ...data,
    maxAttempts: data.RETRY_DELAYS_SECONDS.length + 1,
    templateLimits: {
      parseChars: data.TEMPLATE_PARSE_LIMIT,
      renderMs: data.TEMPLATE_RENDER_LIMIT_MS,
      memory: data.TEMPLATE_MEMORY_LIMIT,
      outputBytes: data.TEMPLATE_OUTPUT_LIMIT_BYTES,
    },
  }
  parsed.set(env, config)
  return config
}
