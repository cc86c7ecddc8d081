import type { Logger } from 'pino'
import { type AsyncMessage, Connection, type Consumer, ConsumerStatus } from 'rabbitmq-client'
import type { InboundEvent } from '../../../../src/contracts/index.ts'
import type { BridgeConfig } from '../../config.ts'
import type { Metrics } from '../../metrics.ts'
import { backoffMs, sleep } from '../../sink/backoff.ts'
import { fitForQueue } from '../../sink/marker.ts'
import type { Sink } from '../../sink/sink.ts'
import { payloadOf, sha256Hex, stringHeaders } from '../payload.ts'

/** Seed 000's dead-letter queue and the exchange that routes to it. */
const DLQ = 'email.notifications.dlq'
const DLX = 'email.notifications.dlx'

/**
 * The RabbitMQ source (seed `arthunt-email-notifications.asyncapi`): consumes
 * the queue with manual acks and a bounded prefetch; each message is acked
 * only after the Worker accepted it (handlers run concurrently, so the sink
 * batches them). rabbitmq-client reconnects by itself and sets the consumer
 * up again after a broker restart or a closed connection; unacked messages go
 * back to the queue. A message too large for a queue message sends its marker
 * and is rejected into the dead-letter queue, where the original stays.
 */
export class RabbitSource {
  readonly name = 'rabbitmq'
  readonly #config: BridgeConfig
  readonly #sink: Sink
  readonly #log: Logger
  readonly #metrics: Metrics
  readonly #connection: Connection
  #consumer: Consumer | undefined
  #up = false
  #stopping = false

  constructor(config: BridgeConfig, sink: Sink, log: Logger, metrics: Metrics) {
    this.#config = config
    this.#sink = sink
    this.#log = log.child({ source: 'rabbitmq' })
    this.#metrics = metrics
    this.#connection = new Connection({
      url: config.RABBITMQ_URL as string,
      connectionName: 'notify-edge-bridge',
      retryLow: 200,
      retryHigh: 15_000,
    })
    this.#connection.on('connection', () => this.#log.info('source:connected'))
    this.#connection.on('error', (error) => {
      this.#setUp(false)
      this.#log.warn({ error }, 'source:disconnected; reconnecting')
    })
    metrics.sourceUp.set({ source: 'rabbitmq' }, 0)
  }

  /** True while the consumer is set up on a live connection. */
  get up(): boolean {
    return this.#up
  }

  /** Declares the topology when asked, then consumes. */
  start(): void {
    void this.#start()
  }

  async #start(): Promise<void> {
    const config = this.#config
    if (config.RABBITMQ_DECLARE) {
      for (let attempt = 0; !this.#stopping; attempt += 1) {
        try {
          await this.#connection.exchangeDeclare({ exchange: DLX, type: 'direct', durable: true })
          await this.#connection.queueDeclare({ queue: DLQ, durable: true })
          await this.#connection.queueBind({ queue: DLQ, exchange: DLX, routingKey: DLQ })
          break
        } catch (error) {
          this.#log.warn({ error }, 'declaring the dead-letter queue failed; retrying')
          await sleep(backoffMs(attempt))
        }
      }
    }
    const declare = config.RABBITMQ_DECLARE
    this.#consumer = this.#connection.createConsumer(
      {
        queue: config.RABBITMQ_QUEUE,
        // Declared as seed 000 has it, or only checked (passive) when someone else owns the topology.
        queueOptions: declare
          ? { durable: true, arguments: { 'x-dead-letter-exchange': DLX, 'x-dead-letter-routing-key': DLQ } }
          : { passive: true },
        exchanges: declare ? [{ exchange: config.RABBITMQ_EXCHANGE, type: 'topic', durable: true }] : [],
        queueBindings: declare
          ? config.RABBITMQ_ROUTING_KEYS.map((routingKey) => ({
              queue: config.RABBITMQ_QUEUE,
              exchange: config.RABBITMQ_EXCHANGE,
              routingKey,
            }))
          : [],
        qos: { prefetchCount: config.RABBITMQ_PREFETCH },
        concurrency: config.RABBITMQ_PREFETCH,
        requeue: true,
      },
      (message) => this.#handle(message),
    )
    this.#consumer.on('ready', () => {
      this.#setUp(true)
      this.#log.info({ queue: config.RABBITMQ_QUEUE }, 'source:consuming')
    })
    this.#consumer.on('error', (error) => {
      this.#setUp(false)
      this.#log.warn({ error }, 'consumer error; it sets itself up again')
    })
  }

  async #handle(message: AsyncMessage): Promise<ConsumerStatus> {
    const event = this.#toInbound(message)
    const tooLarge = fitForQueue(event) !== event
    await this.#sink.send([event])
    // The marker is with the Worker; the original goes to the dead-letter queue.
    return tooLarge ? ConsumerStatus.DROP : ConsumerStatus.ACK
  }

  /**
   * A delivery as an inbound event. rabbitmq-client parses JSON and text bodies
   * by content type; those are serialized back (same JSON, not the same bytes).
   */
  #toInbound(message: AsyncMessage): InboundEvent {
    const raw: unknown = message.body
    const bytes = Buffer.isBuffer(raw)
      ? raw
      : Buffer.from(typeof raw === 'string' ? raw : raw === undefined || raw === null ? '' : JSON.stringify(raw))
    const headers = stringHeaders(message.headers as Record<string, unknown> | undefined)
    if (message.contentType) headers['content-type'] = message.contentType
    if (message.type) headers['amqp-type'] = message.type
    if (message.correlationId) headers['amqp-correlation-id'] = message.correlationId
    return {
      source: 'rabbitmq',
      origin: `rabbitmq:${message.exchange || '(default)'}/${message.routingKey}`,
      sourceMessageId: message.messageId ?? sha256Hex(bytes),
      receivedAt: new Date().toISOString(),
      headers,
      ...payloadOf(bytes),
    }
  }

  /** Stops consuming; handlers in flight finish (their messages are acked or requeued). */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopping = true
    await Promise.race([this.#consumer?.close(), sleep(timeoutMs)])
    await this.#connection.close().catch(() => {})
  }

  #setUp(up: boolean): void {
    if (up !== this.#up) this.#log.info({ up }, up ? 'source:up' : 'source:down')
    this.#up = up
    this.#metrics.sourceUp.set({ source: 'rabbitmq' }, up ? 1 : 0)
  }
}
