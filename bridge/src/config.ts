import { commaList } from '@notify-edge/contracts'
import { z } from 'zod'

const Identifier = z.string().regex(/^[a-z_][a-z0-9_]*$/, 'a lower-case SQL identifier')
const Milliseconds = z.coerce.number().int().positive()
const List = commaList(z.string().min(1)).refine((items) => items.length > 0, 'at least one item')
const Bool = z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1')

const ConfigSchema = z.object({
  /** The Worker's ingest route. @defaultValue "http://127.0.0.1:8787/v1/ingest" */
  SINK_URL: z.url({ protocol: /^https?$/ }).default('http://127.0.0.1:8787/v1/ingest'),
  /** The Worker's INGEST_TOKEN. @defaultValue "dev-ingest-token-change-me" (.dev.vars.example) */
  SINK_TOKEN: z.string().min(1).default('dev-ingest-token-change-me'),
  /** Requests to the sink in flight at once. @defaultValue 4 */
  SINK_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  /** How long the sink waits to fill a batch. @defaultValue 5 */
  SINK_LINGER_MS: z.coerce.number().int().min(0).max(1000).default(5),
  /** Timeout of one sink request. @defaultValue 15000 */
  SINK_TIMEOUT_MS: Milliseconds.default(15_000),
  /** PostgreSQL connection URL; the outbox source is enabled when set. */
  PG_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'a postgres:// URL')
    .optional(),
  /** Schema of the outbox tables. @defaultValue "data_exchange" */
  PG_SCHEMA: Identifier.default('data_exchange'),
  /** NOTIFY channel of the outbox trigger. @defaultValue "queue_message_log" */
  PG_CHANNEL: Identifier.default('queue_message_log'),
  /** `notify` (LISTEN + sweeps) or `poll` (sweeps only, no trigger needed). @defaultValue "notify" */
  PG_MODE: z.enum(['notify', 'poll']).default('notify'),
  /** Rows claimed per transaction. @defaultValue 100 */
  PG_BATCH_SIZE: z.coerce.number().int().min(1).max(1000).default(100),
  /** Claim loops running at once (each holds one batch in flight). @defaultValue 3 */
  PG_CLAIMERS: z.coerce.number().int().min(1).max(16).default(3),
  /** Interval of the sweep (the poll interval in poll mode). @defaultValue 1000 */
  PG_SWEEP_INTERVAL_MS: Milliseconds.default(1000),
  /**
   * How long a claim holds rows before another bridge may take them; renewed every third of it
   * while the batch is on its way, so it only runs out when its bridge is gone. @defaultValue 30000
   */
  PG_LEASE_MS: z.coerce.number().int().min(1000).default(30_000),
  /** AMQP URL; the RabbitMQ source is enabled when set. */
  RABBITMQ_URL: z
    .string()
    .regex(/^amqps?:\/\//, 'an amqp:// URL')
    .optional(),
  /** Exchange the ArtHunt events are published on. @defaultValue "arthunt.notifications" */
  RABBITMQ_EXCHANGE: z.string().min(1).default('arthunt.notifications'),
  /** Queue the bridge consumes. @defaultValue "email.notifications" */
  RABBITMQ_QUEUE: z.string().min(1).default('email.notifications'),
  /** Routing keys bound to the queue (comma-separated). @defaultValue both of seed 000 */
  RABBITMQ_ROUTING_KEYS: List.default([
    'notifications.email.response.created',
    'notifications.email.invitation.created',
  ]),
  /**
   * Where the original of a message that travelled as a marker is kept (declared if missing,
   * whether or not RABBITMQ_DECLARE is set). @defaultValue "email.notifications.dlq"
   */
  RABBITMQ_DLQ: z.string().min(1).default('email.notifications.dlq'),
  /** Unacknowledged messages at once (prefetch). @defaultValue 100 */
  RABBITMQ_PREFETCH: z.coerce.number().int().min(1).max(10_000).default(100),
  /** Declare seed 000's topology (exchange, queue, bindings, dead-letter queue) instead of using the queue as it is. @defaultValue false */
  RABBITMQ_DECLARE: Bool.default(false),
  /** Kafka bootstrap brokers (comma-separated); the Kafka source is enabled when set. */
  KAFKA_BROKERS: List.optional(),
  /** Consumer group. @defaultValue "notifications-profile-events" */
  KAFKA_GROUP_ID: z.string().min(1).default('notifications-profile-events'),
  /** Topics (comma-separated). @defaultValue seed 002's */
  KAFKA_TOPICS: List.default(['pin.profile.verification-requests.v1', 'pin.profile.persons.v1']),
  /** Client id. @defaultValue "notify-edge-bridge" */
  KAFKA_CLIENT_ID: z.string().min(1).default('notify-edge-bridge'),
  /** Port of /healthz, /readyz and /metrics. @defaultValue 8788 */
  HTTP_PORT: z.coerce.number().int().min(0).max(65_535).default(8788),
  /** pino level. @defaultValue "info" */
  LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  /** How long SIGTERM waits for in-flight work before giving up on it (it stays at its source). @defaultValue 10000 */
  SHUTDOWN_TIMEOUT_MS: Milliseconds.default(10_000),
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
