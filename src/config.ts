import { z } from 'zod'
import { ApiError } from './errors.ts'

const DelayList = z
  .string()
  .regex(/^\d+(,\d+)*$/, 'a comma-separated list of whole seconds, e.g. "5,30"')
  .transform((value) => value.split(',').map(Number))
  .refine((delays) => delays.every((delay) => delay <= 43_200), 'each delay is at most 43200 s (the Queues limit)')

const Token = z.string().min(16, 'at least 16 characters')

const ConfigSchema = z
  .object({
    INGEST_TOKEN: Token,
    ADMIN_TOKEN: Token,
    /** Delays before attempts 2, 3, …; after the last one the message is dead-lettered. @defaultValue "5,30" */
    RETRY_DELAYS_SECONDS: DelayList.default([5, 30]),
    /** How long processed-event keys are kept for deduplication. @defaultValue 30 */
    PROCESSED_EVENTS_RETENTION_DAYS: z.coerce.number().int().min(7).default(30),
    LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  })
  .refine((config) => config.INGEST_TOKEN !== config.ADMIN_TOKEN, {
    path: ['ADMIN_TOKEN'],
    message: 'must differ from INGEST_TOKEN, or the ingest token would grant admin',
  })

/** The Worker's configuration, parsed from its variables and secrets. */
export type Config = z.infer<typeof ConfigSchema> & {
  /** Attempts before a retryable failure is dead-lettered: one more than the delays. */
  maxAttempts: number
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
  const config = { ...result.data, maxAttempts: result.data.RETRY_DELAYS_SECONDS.length + 1 }
  parsed.set(env, config)
  return config
}
