import type { InboundEvent } from '@notify-edge/contracts'
import type { Logger } from 'pino'
import { type AsyncMessage, Connection, type Consumer, ConsumerStatus, type Publisher } from 'rabbitmq-client'
import type { BridgeConfig } from '../../config.ts'
import type { Metrics } from '../../metrics.ts'
import { backoffMs, sleep } from '../../sink/backoff.ts'
import type { MarkerKind } from '../../sink/marker.ts'
import type { Sink } from '../../sink/sink.ts'
import { sha256Hex } from '../../sink/wire.ts'
import { payloadOf, stringHeaders } from '../payload.ts'
import { contentTypeOf, keepRawBodies } from './raw-body.ts'

/** The exchange that routes the declared queue's own dead letters to the dead-letter queue (as the ArtHunt AsyncAPI declares it). */
const DLX = 'email.notifications.dlx'

/**
 * The RabbitMQ source (ArtHunt's email-notification AsyncAPI): consumes
 * the queue with manual acks and a bounded prefetch; each message is acked
 * only after the Worker accepted it (handlers run concurrently, so the sink
 * batches them). rabbitmq-client reconnects by itself and sets the consumer
 * up again after a broker restart or a closed connection; unacked messages go
 * back to the queue. Bodies are forwarded as the broker holds them, whatever
 * their content type. A message that travels as a marker (too large, or
 * refused by the ingest route) is published, exactly as it came, to the
 * dead-letter queue (declared by the bridge if it does not exist, also when the
 * main queue is used passively) and only then acked: the original stays there.
 */
export class RabbitSource {
  readonly name = 'rabbitmq'
  readonly #config: BridgeConfig
  readonly #sink: Sink
  readonly #log: Logger
  readonly #metrics: Metrics
  readonly #connection: Connection
  readonly #dlq: Publisher
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
    keepRawBodies()
    this.#dlq = this.#connection.createPublisher({ confirm: true, maxAttempts: 3 })
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
    // In the background: consuming does not wait for it (a marker's original waits for it instead).
    void this.#ensureDeadLetterQueue()
    const declare = config.RABBITMQ_DECLARE
    this.#consumer = this.#connection.createConsumer(
      {
        queue: config.RABBITMQ_QUEUE,
        // Declared as the ArtHunt AsyncAPI has it, or only checked (passive) when someone else owns the topology.
        queueOptions: declare
          ? {
              durable: true,
              arguments: { 'x-dead-letter-exchange': DLX, 'x-dead-letter-routing-key': config.RABBITMQ_DLQ },
            }
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

  async #ensureDeadLetterQueue(): Promise<void> {
    for (let attempt = 0; !this.#stopping; attempt += 1) {
      try {
        await this.#declareDeadLetterQueue()
        return
      } catch (error) {
        const wait = backoffMs(attempt, 500)
        this.#log.warn(
          { error, queue: this.#config.RABBITMQ_DLQ, waitMs: Math.round(wait) },
          'declaring the dead-letter queue failed; retrying',
        )
        await sleep(wait)
      }
    }
  }

  /**
   * The dead-letter queue, durable, and in declare mode the exchange that routes
   * the main queue's own dead letters to it. A queue that exists with other
   * arguments (say a quorum queue) is used as it is.
   */
  async #declareDeadLetterQueue(): Promise<void> {
    const queue = this.#config.RABBITMQ_DLQ
    try {
      await this.#connection.queueDeclare({ queue, durable: true })
    } catch (error) {
      if ((error as { code?: string }).code !== 'PRECONDITION_FAILED') throw error
      await this.#connection.queueDeclare({ queue, passive: true })
    }
    if (this.#config.RABBITMQ_DECLARE) {
      await this.#connection.exchangeDeclare({ exchange: DLX, type: 'direct', durable: true })
      await this.#connection.queueBind({ queue, exchange: DLX, routingKey: queue })
    }
  }

  async #handle(message: AsyncMessage): Promise<ConsumerStatus> {
    try {
      const bytes = Buffer.isBuffer(message.body) ? message.body : Buffer.from(String(message.body ?? ''))
      const [delivery] = await this.#sink.send([this.#toInbound(message, bytes)], {
        keptAt: `rabbitmq:${this.#config.RABBITMQ_DLQ}`,
      })
      // The marker is with the Worker; the original goes to the dead-letter queue before the ack.
      if (delivery?.as === 'marker') await this.#keepInDeadLetterQueue(message, bytes, delivery.marker)
      return ConsumerStatus.ACK
    } catch (error) {
      // Nothing here should throw; if it does, the message goes back to the queue, not away.
      this.#log.error({ error }, 'handling a delivery failed; requeueing it')
      await sleep(backoffMs(3))
      return ConsumerStatus.REQUEUE
    }
  }

  /**
   * Publishes the original, bytes and properties as they came, to the
   * dead-letter queue, until the broker confirms. After three refusals the
   * original headers are left out (one the broker cannot take must not hold
   * the message forever); the body never is. Stopping gives up: the message
   * is requeued.
   */
  async #keepInDeadLetterQueue(message: AsyncMessage, bytes: Buffer, marker: MarkerKind): Promise<void> {
    const queue = this.#config.RABBITMQ_DLQ
    for (let attempt = 0; ; attempt += 1) {
      if (this.#stopping) throw new Error('stopping before the original was kept; it goes back to the queue')
      try {
        await this.#dlq.send(
          {
            exchange: '',
            routingKey: queue,
            durable: true,
            messageId: message.messageId,
            correlationId: message.correlationId,
            type: message.type,
            contentType: contentTypeOf(message),
            contentEncoding: message.contentEncoding,
            timestamp: message.timestamp,
            headers: {
              ...(attempt < 3 ? message.headers : {}),
              'x-notify-edge-marker': marker,
              'x-notify-edge-origin': `rabbitmq:${message.exchange || '(default)'}/${message.routingKey}`,
            },
          },
          bytes,
        )
        return
      } catch (error) {
        const wait = backoffMs(attempt, 500)
        this.#log.error(
          { error, queue, waitMs: Math.round(wait) },
          'cannot keep the original in the dead-letter queue; retrying',
        )
        await sleep(wait)
      }
    }
  }

  /** A delivery as an inbound event: the body's bytes as the broker holds them. */
  #toInbound(message: AsyncMessage, bytes: Buffer): InboundEvent {
    const headers = stringHeaders(message.headers as Record<string, unknown> | undefined)
    const contentType = contentTypeOf(message)
    if (contentType) headers['content-type'] = contentType
    if (message.contentEncoding) headers['content-encoding'] = message.contentEncoding
    if (message.type) headers['amqp-type'] = message.type
    if (message.correlationId) headers['amqp-correlation-id'] = message.correlationId
    return {
      source: 'rabbitmq',
      origin: `rabbitmq:${message.exchange || '(default)'}/${message.routingKey}`,
      sourceMessageId: message.messageId || sha256Hex(bytes),
      receivedAt: new Date().toISOString(),
      headers,
      ...payloadOf(bytes),
    }
  }

  /** Stops consuming; handlers in flight finish (their messages are acked or requeued). */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopping = true
    await Promise.race([this.#consumer?.close(), sleep(timeoutMs)])
    await this.#dlq.close().catch(() => {})
    await this.#connection.close().catch(() => {})
  }

  #setUp(up: boolean): void {
    if (up !== this.#up) this.#log.info({ up }, up ? 'source:up' : 'source:down')
    this.#up = up
    this.#metrics.sourceUp.set({ source: 'rabbitmq' }, up ? 1 : 0)
  }
}
