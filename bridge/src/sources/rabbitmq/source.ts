import type { InboundEvent } from '@notify-edge/contracts'
import { type AsyncMessage, Connection, type Consumer, ConsumerStatus, type Publisher } from 'rabbitmq-client'
import type { BridgeConfig } from '../../config.ts'
import type { Logger } from '../../log.ts'
import type { Metrics } from '../../metrics.ts'
import { backoffMs, sleep } from '../../sink/backoff.ts'
import type { MarkerKind } from '../../sink/marker.ts'
import type { Sink } from '../../sink/sink.ts'
import { sha256Hex } from '../../sink/wire.ts'
import { payloadOf, stringHeaders } from '../payload.ts'
import { contentTypeOf, keepRawBodies } from './raw-body.ts'

/** The exchange that routes the declared queue's own dead letters to the dead-letter queue (as the ArtHunt AsyncAPI declares it). */
const DLX = 'email.notifications.dlx'

/** Deliveries the Worker accepted on a channel that closed before their ack, remembered until redelivered (oldest dropped first). */
const REMEMBERED_MAX = 10_000

/** How rabbitmq-client reports an ack or nack it could not send because the message's channel had closed. */
function isStaleAck(error: unknown): boolean {
  const { code, message } = error as { code?: unknown; message?: unknown }
  return code === 'CH_CLOSE' && typeof message === 'string' && message.startsWith('failed to ack/nack message')
}

/** What identifies a delivery across its redelivery: where it was published, its message-id and its bytes. */
function deliveryKey(message: AsyncMessage, bytes: Buffer): string {
  return JSON.stringify([message.exchange, message.routingKey, message.messageId ?? null, sha256Hex(bytes)])
}

/** The broker closing a channel whose deliveries outlived its `consumer_timeout`. */
function isAckTimeout(error: unknown): boolean {
  const { code, message } = error as { code?: unknown; message?: unknown }
  return code === 'PRECONDITION_FAILED' && typeof message === 'string' && /acknowledgement.*timed out/i.test(message)
}

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
 *
 * A Worker outage longer than the broker's `consumer_timeout` makes RabbitMQ
 * close the consumer's channel and requeue what it held. rabbitmq-client acks
 * a message only on the channel it came on, so nothing stale reaches the new
 * channel; it sets the consumer up again once the held deliveries are settled
 * (when the Worker accepts them). Those the Worker accepted after their channel
 * closed are remembered, and their redeliveries acked without forwarding them
 * again. The timeout is logged once, as an error, and counted.
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
  /** Deliveries being forwarded now. */
  #holding = 0
  /** Keys of deliveries the Worker accepted whose channel closed before the ack (insertion order: oldest first). */
  readonly #acceptedUnacked = new Set<string>()
  /** Since the consumer was last set up: acks and nacks that could not be sent (their channel had closed). */
  #staleAcks = 0
  /** Redeliveries acked without forwarding (the Worker had them) since the remembered ones were last all redelivered. */
  #skipped = 0

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
    this.#connection.on('connection', () => this.#log.info('source.connected'))
    this.#connection.on('error', (error) => {
      this.#setUp(false)
      this.#log.warn('source.disconnected', { error })
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
      this.#log.info('source.consuming', { queue: config.RABBITMQ_QUEUE })
      if (this.#staleAcks > 0) {
        this.#log.warn('rabbitmq.stale-acks', {
          staleAcks: this.#staleAcks,
          awaitingRedelivery: this.#acceptedUnacked.size,
        })
        this.#staleAcks = 0
      }
    })
    this.#consumer.on('error', (error) => {
      if (isStaleAck(error)) {
        // One per delivery of a closed channel: summed up when the consumer is set up again.
        this.#staleAcks += 1
        return
      }
      this.#setUp(false)
      if (isAckTimeout(error)) {
        this.#metrics.rabbitmqAckTimeouts.inc()
        this.#log.error('rabbitmq.consumer-timeout', { error, holding: this.#holding, queue: config.RABBITMQ_QUEUE })
        return
      }
      this.#log.warn('rabbitmq.consumer-error', { error })
    })
  }

  async #ensureDeadLetterQueue(): Promise<void> {
    for (let attempt = 0; !this.#stopping; attempt += 1) {
      try {
        await this.#declareDeadLetterQueue()
        return
      } catch (error) {
        const wait = backoffMs(attempt, 500)
        this.#log.warn('rabbitmq.dlq-declare-failed', {
          error,
          queue: this.#config.RABBITMQ_DLQ,
          waitMs: Math.round(wait),
        })
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
    const channel = this.#channel()
    const bytes = Buffer.isBuffer(message.body) ? message.body : Buffer.from(String(message.body ?? ''))
    if (
      message.redelivered &&
      this.#acceptedUnacked.size > 0 &&
      this.#acceptedUnacked.delete(deliveryKey(message, bytes))
    ) {
      // The Worker accepted it before; its ack was lost with its channel.
      this.#skipped += 1
      if (this.#acceptedUnacked.size === 0) {
        this.#log.info('rabbitmq.redeliveries-skipped', { skipped: this.#skipped })
        this.#skipped = 0
      }
      return ConsumerStatus.ACK
    }
    this.#holding += 1
    try {
      const [delivery] = await this.#sink.send([this.#toInbound(message, bytes)], {
        keptAt: `rabbitmq:${this.#config.RABBITMQ_DLQ}`,
      })
      // The marker is with the Worker; the original goes to the dead-letter queue before the ack.
      if (delivery?.as === 'marker') await this.#keepInDeadLetterQueue(message, bytes, delivery.marker)
      if (channel?.active === false) this.#rememberAccepted(deliveryKey(message, bytes))
      return ConsumerStatus.ACK
    } catch (error) {
      // Nothing here should throw; if it does, the message goes back to the queue, not away.
      this.#log.error('rabbitmq.delivery-requeued', { error })
      await sleep(backoffMs(3))
      return ConsumerStatus.REQUEUE
    } finally {
      this.#holding -= 1
    }
  }

  /**
   * The consumer's channel now, which is the one a delivery being handled came
   * on: rabbitmq-client reads it the same way to ack (Consumer#_execHandler),
   * and sets up a new channel only after every handler settled. The library
   * is pinned; without the field nothing is remembered, and redeliveries are
   * forwarded again (the Worker deduplicates them).
   */
  #channel(): { active: boolean } | undefined {
    const channel = (this.#consumer as unknown as { _ch?: { active?: unknown } } | undefined)?._ch
    return typeof channel?.active === 'boolean' ? (channel as { active: boolean }) : undefined
  }

  /** A delivery the Worker accepted whose ack cannot be sent: its redelivery is acked without forwarding. */
  #rememberAccepted(key: string): void {
    this.#acceptedUnacked.add(key)
    if (this.#acceptedUnacked.size > REMEMBERED_MAX) {
      const oldest = this.#acceptedUnacked.values().next().value
      if (oldest !== undefined) this.#acceptedUnacked.delete(oldest)
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
        this.#log.error('rabbitmq.dlq-publish-failed', { error, queue, waitMs: Math.round(wait) })
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
    if (up !== this.#up) this.#log.info(up ? 'source.up' : 'source.down', { up })
    this.#up = up
    this.#metrics.sourceUp.set({ source: 'rabbitmq' }, up ? 1 : 0)
  }
}
