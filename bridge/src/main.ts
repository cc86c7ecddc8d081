/**
 * The notify-edge bridge: forwards events from the PostgreSQL outbox, RabbitMQ
 * and Kafka to the Worker's ingest route. `npm run bridge`.
 */
import { parseConfig } from './config.ts'
import { startHttp } from './http.ts'
import { createLogger } from './log.ts'
import { createMetrics } from './metrics.ts'
import { Sink } from './sink/sink.ts'
import { KafkaSource } from './sources/kafka/source.ts'
import { PostgresRelay } from './sources/postgres/relay.ts'
import { RabbitSource } from './sources/rabbitmq/source.ts'

let config: ReturnType<typeof parseConfig>
try {
  config = parseConfig(process.env)
} catch (error) {
  process.stderr.write(`notify-edge bridge: ${(error as Error).message}\n`)
  process.exit(2)
}

const log = createLogger(config.LOG_LEVEL)
const metrics = createMetrics()
const sink = new Sink(
  {
    url: config.SINK_URL,
    token: config.SINK_TOKEN,
    concurrency: config.SINK_CONCURRENCY,
    lingerMs: config.SINK_LINGER_MS,
    timeoutMs: config.SINK_TIMEOUT_MS,
  },
  log,
  metrics,
)
// A source is enabled when its URL is set; each reconnects on its own, and one down never stops the others.
const sources = [
  ...(config.PG_URL ? [new PostgresRelay(config, sink, log, metrics)] : []),
  ...(config.RABBITMQ_URL ? [new RabbitSource(config, sink, log, metrics)] : []),
  ...(config.KAFKA_BROKERS ? [new KafkaSource(config, sink, log, metrics)] : []),
]
if (sources.length === 0) log.warn('bridge.no-sources', { hint: 'set PG_URL, RABBITMQ_URL or KAFKA_BROKERS' })

const server = await startHttp(config.HTTP_PORT, metrics, () => ({
  sources: sources.map((source) => ({ name: source.name, up: source.up })),
  sinkHealthy: sink.healthy,
  sinkUrl: config.SINK_URL,
}))
for (const source of sources) source.start()
log.info('bridge.started', {
  sources: sources.map((source) => source.name),
  sink: config.SINK_URL,
  port: config.HTTP_PORT,
})

let stopping = false
async function shutdown(signal: string): Promise<void> {
  if (stopping) return
  stopping = true
  // No new claims from here; what is in flight gets up to SHUTDOWN_TIMEOUT_MS.
  log.info('bridge.stopping', { signal, timeoutMs: config.SHUTDOWN_TIMEOUT_MS })
  const deadline = setTimeout(() => sink.abort(), config.SHUTDOWN_TIMEOUT_MS)
  await Promise.all(sources.map((source) => source.stop(config.SHUTDOWN_TIMEOUT_MS)))
  clearTimeout(deadline)
  server.close()
  log.info('bridge.stopped')
  process.exit(0)
}
process.on('SIGTERM', () => void shutdown('SIGTERM'))
process.on('SIGINT', () => void shutdown('SIGINT'))
