import { commaList } from '@notify-edge/contracts'
import { z } from 'zod'

const Identifier = z.string().regex(/^[a-z_][a-z0-9_]*$/, 'a lower-case SQL identifier')
const Milliseconds = z.coerce.number().int().positive()
const List = commaList(z.string().min(1)).refine((items) => items.length > 0, 'at least one item')
const Bool = z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1')

/**
 * Every variable of the bridge. Each field's description and default are
 * what docs/configuration.md shows (generated from this schema, kept equal by
 * a test).
 */
export const ConfigSchema = z.object({
  SINK_URL: z
    .url({ protocol: /^https?$/ })
    .default('http://127.0.0.1:8787/v1/ingest')
    .describe("the Worker's ingest route"),
  SINK_TOKEN: z.string().min(1).default('dev-ingest-token-change-me').describe("the Worker's INGEST_TOKEN"),
  SINK_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(4)
    .describe('requests to the sink in flight at once'),
  SINK_LINGER_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(1000)
    .default(5)
    .describe('how long the sink waits to fill a batch'),
  SINK_TIMEOUT_MS: Milliseconds.default(15_000).describe('timeout of one sink request'),
  PG_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'a postgres:// URL')
    .optional()
    .describe('PostgreSQL connection URL; the outbox source is enabled when set'),
  PG_SCHEMA: Identifier.default('data_exchange').describe('schema of the outbox tables'),
  PG_CHANNEL: Identifier.default('queue_message_log').describe('NOTIFY channel of the outbox trigger'),
  PG_MODE: z
    .enum(['notify', 'poll'])
    .default('notify')
    .describe('`notify` (LISTEN + sweeps) or `poll` (sweeps only, no trigger needed)'),
  PG_BATCH_SIZE: z.coerce.number().int().min(1).max(1000).default(100).describe('rows claimed at once'),
  PG_CLAIMERS: z.coerce
    .number()
    .int()
    .min(1)
    .max(16)
    .default(3)
    .describe('claim loops at once: the next batch is claimed while one is on its way'),
  PG_SWEEP_INTERVAL_MS: Milliseconds.default(1000).describe('interval of the sweep (the poll interval in poll mode)'),
  PG_LEASE_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(30_000)
    .describe(
      'how long a claim holds rows before another bridge may take them; renewed every third of it while the batch is on its way',
    ),
  PG_DATA_WAIT_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(60_000)
    .describe(
      'how long an outbox row waits for its data row (passed over meanwhile; the rows behind it go on) before it is forwarded without a body and dead-lettered',
    ),
  RABBITMQ_URL: z
    .string()
    .regex(/^amqps?:\/\//, 'an amqp:// URL')
    .optional()
    .describe('AMQP URL; the RabbitMQ source is enabled when set'),
  RABBITMQ_EXCHANGE: z
    .string()
    .min(1)
    .default('arthunt.notifications')
    .describe('exchange the ArtHunt events are published on'),
  RABBITMQ_QUEUE: z.string().min(1).default('email.notifications').describe('queue the bridge consumes'),
  RABBITMQ_ROUTING_KEYS: List.prefault(
    'notifications.email.response.created,notifications.email.invitation.created,notifications.email.invitation.withdrawn',
  ).describe('routing keys bound to the queue, comma-separated (with RABBITMQ_DECLARE)'),
  RABBITMQ_DLQ: z
    .string()
    .min(1)
    .default('email.notifications.dlq')
    .describe('where the original of a message that travelled as a marker is kept (declared when missing)'),
  RABBITMQ_PREFETCH: z.coerce
    .number()
    .int()
    .min(1)
    .max(10_000)
    .default(100)
    .describe('unacknowledged messages at once'),
  RABBITMQ_DECLARE: Bool.prefault('false').describe(
    'declare the ArtHunt topology (exchange, queue, bindings, dead-letter exchange) instead of using the queue as it is',
  ),
  KAFKA_BROKERS: List.optional().describe('bootstrap brokers, comma-separated; the Kafka source is enabled when set'),
  KAFKA_GROUP_ID: z.string().min(1).default('notifications-profile-events').describe('consumer group'),
  KAFKA_TOPICS: List.prefault(
    'pin.profile.verification-requests.v1,pin.profile.persons.v1,pin.identity.contacts.v1',
  ).describe('topics, comma-separated: the PIN profile events, and the contacts their recipients are read from'),
  KAFKA_CLIENT_ID: z.string().min(1).default('notify-edge-bridge').describe('Kafka client id'),
  HTTP_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65_535)
    .default(8788)
    .describe('port of /healthz, /readyz and /metrics'),
  LOG_LEVEL: z
    .enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
    .default('info')
    .describe('pino log level'),
  SHUTDOWN_TIMEOUT_MS: Milliseconds.default(10_000).describe(
    'how long SIGTERM waits for in-flight work before giving up on it (it stays at its source)',
  ),
})

/** The bridge's configuration. */
export type BridgeConfig = z.infer<typeof ConfigSchema>

/** Parses the environment once; throws an Error naming every bad variable. */
export function parseConfig(environment: Record<string, string | undefined>): BridgeConfig {
  // An empty variable counts as unset, as in most container setups.
  const defined = Object.fromEntries(
    Object.entries(environment).filter(([, value]) => value !== undefined && value !== ''),
  )
  const result = ConfigSchema.safeParse(defined)
  if (result.success) return result.data
  const problems = result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`)
  throw new Error(`invalid configuration: ${problems.join('; ')}`)
}
