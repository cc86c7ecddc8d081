import { INGEST_MAX_EVENTS, type InboundEvent } from '@notify-edge/contracts'
import { type Consumer, type EachBatchPayload, Kafka, type KafkaMessage, logLevel } from 'kafkajs'
import type { BridgeConfig } from '../../config.ts'
import type { Logger } from '../../log.ts'
import type { Metrics } from '../../metrics.ts'
import { backoffMs, sleep } from '../../sink/backoff.ts'
import type { Sink } from '../../sink/sink.ts'
import { payloadOf, stringHeaders } from '../payload.ts'

/** Heartbeat while a batch waits for the Worker, well inside the session timeout. */
const HEARTBEAT_MS = 3000

/** How long a batch may wait for the sink before its partition stops fetching. */
const PAUSE_AFTER_MS = 5000

/**
 * The Kafka source (the PIN profile-events spec): consumer group `notifications-profile-events`
 * on the PIN profile topics. Each partition's records go to the Worker in
 * order, 100 at a time; an offset is resolved and committed only after the
 * Worker accepted everything before it. While the Worker does not accept, the
 * partition is paused (no more fetching) and heartbeats go on, so the group
 * keeps it; it resumes when the sink delivers. SIGTERM leaves the group.
 */
export class KafkaSource {
  readonly name = 'kafka'
  readonly #config: BridgeConfig
  readonly #sink: Sink
  readonly #log: Logger
  readonly #metrics: Metrics
  readonly #consumer: Consumer
  #up = false
  #crashes = 0
  #running: Promise<void> | undefined
  readonly #stop = new AbortController()

  constructor(config: BridgeConfig, sink: Sink, log: Logger, metrics: Metrics) {
    this.#config = config
    this.#sink = sink
    this.#log = log.child({ source: 'kafka' })
    this.#metrics = metrics
    const kafka = new Kafka({
      clientId: config.KAFKA_CLIENT_ID,
      brokers: config.KAFKA_BROKERS as string[],
      logLevel: logLevel.NOTHING,
      retry: { initialRetryTime: 300, maxRetryTime: 15_000, retries: Number.MAX_SAFE_INTEGER },
    })
    this.#consumer = kafka.consumer({
      groupId: config.KAFKA_GROUP_ID,
      sessionTimeout: 30_000,
      heartbeatInterval: HEARTBEAT_MS,
      retry: { initialRetryTime: 300, maxRetryTime: 15_000, retries: Number.MAX_SAFE_INTEGER },
    })
    const { CONNECT, DISCONNECT, CRASH, GROUP_JOIN, REBALANCING } = this.#consumer.events
    this.#consumer.on(CONNECT, () => this.#log.info('source.connected'))
    this.#consumer.on(GROUP_JOIN, ({ payload }) => {
      this.#crashes = 0
      this.#setUp(true)
      this.#log.info('source.joined-group', { memberAssignment: payload.memberAssignment })
    })
    this.#consumer.on(REBALANCING, () => this.#log.info('source.rebalancing'))
    this.#consumer.on(DISCONNECT, () => this.#setUp(false))
    this.#consumer.on(CRASH, ({ payload }) => {
      this.#setUp(false)
      if (payload.restart) {
        this.#log.warn('source.crashed', { error: payload.error, restartedBy: 'kafkajs' })
        return
      }
      // kafkajs restarts only after retriable errors; after any other it has disconnected for good.
      this.#log.error('source.crashed-given-up', { error: payload.error, restartedBy: 'bridge' })
      void this.#restart()
    })
    metrics.sourceUp.set({ source: 'kafka' }, 0)
  }

  /** True while the consumer is in its group. */
  get up(): boolean {
    return this.#up
  }

  start(): void {
    this.#running = this.#start().catch((error) => this.#log.error('source.stopped', { error }))
  }

  /** Starts the consumer again after kafkajs gave up on it, after a backoff so that a persistent fault is not a hot loop. */
  async #restart(): Promise<void> {
    this.#crashes += 1
    await sleep(backoffMs(this.#crashes, 1000), this.#stop.signal)
    if (!this.#stop.signal.aborted) this.start()
  }

  /**
   * Connects, subscribes and runs, retrying with backoff: a broker that is down
   * or topics that do not exist yet (auto-created on the first metadata
   * request) never stop the source. Once running, kafkajs restarts it after a
   * retriable error, and the CRASH handler after any other.
   */
  async #start(): Promise<void> {
    for (let attempt = 0; !this.#stop.signal.aborted; attempt += 1) {
      try {
        await this.#consumer.connect()
        await this.#consumer.subscribe({ topics: this.#config.KAFKA_TOPICS, fromBeginning: true })
        await this.#consumer.run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          partitionsConsumedConcurrently: 3,
          eachBatch: (payload) => this.#eachBatch(payload),
        })
        return
      } catch (error) {
        this.#setUp(false)
        const wait = backoffMs(attempt, 500)
        this.#log.warn('source.error', { during: 'start', error, waitMs: Math.round(wait) })
        await this.#consumer.disconnect().catch(() => {})
        await sleep(wait, this.#stop.signal)
      }
    }
  }

  /**
   * Forwards a fetched batch 100 records at a time and commits after each
   * accepted chunk. The batch ends early, committing nothing more, when the
   * group rebalances or the bridge stops while the sink is not accepting: the
   * records go again to whoever owns the partition next (duplicates are
   * absorbed downstream), and kafkajs can rejoin instead of waiting on us.
   */
  async #eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch, resolveOffset, heartbeat, pause, isRunning, isStale } = payload
    const { topic, partition } = batch
    for (let start = 0; start < batch.messages.length; start += INGEST_MAX_EVENTS) {
      if (!isRunning() || isStale()) return
      const chunk = batch.messages.slice(start, start + INGEST_MAX_EVENTS)
      const delivered = await this.#deliver(
        chunk.map((message) => this.#toInbound(topic, partition, message)),
        heartbeat,
        pause,
      )
      if (!delivered || !isRunning() || isStale()) return
      const last = chunk[chunk.length - 1] as KafkaMessage
      resolveOffset(last.offset)
      try {
        await this.#consumer.commitOffsets([{ topic, partition, offset: (BigInt(last.offset) + 1n).toString() }])
        await heartbeat()
      } catch (error) {
        if (!isGroupChange(error)) throw error
        // The group is rebalancing: the batch ends, and the partition's next owner reads on from the last commit.
        this.#log.info('kafka.commit-refused', { topic, partition, type: errorType(error) })
        return
      }
    }
  }

  /**
   * Sends to the sink, heartbeating meanwhile; a long wait pauses the
   * partition until it ends. False when it stopped waiting because the group
   * is rebalancing or the bridge is stopping (nothing of the chunk may be committed then).
   */
  async #deliver(events: InboundEvent[], heartbeat: () => Promise<void>, pause: () => () => void): Promise<boolean> {
    let resume: (() => void) | undefined
    const started = Date.now()
    const groupChange = new AbortController()
    const timer = setInterval(() => {
      heartbeat().catch((error) => {
        if (isGroupChange(error)) {
          this.#log.info('kafka.rebalance-ends-batch', { type: errorType(error) })
          groupChange.abort(error)
        } else this.#log.warn('kafka.heartbeat-failed', { error })
      })
      if (!resume && Date.now() - started >= PAUSE_AFTER_MS) {
        resume = pause()
        this.#log.warn('kafka.partition-paused', { events: events.length })
      }
    }, HEARTBEAT_MS)
    try {
      await this.#sink.send(events, { signal: AbortSignal.any([groupChange.signal, this.#stop.signal]) })
      return true
    } catch {
      // Only an abort rejects: the group moved on, or we are stopping.
      return false
    } finally {
      clearInterval(timer)
      if (resume) {
        resume()
        this.#log.info('kafka.partition-resumed')
      }
    }
  }

  #toInbound(topic: string, partition: number, message: KafkaMessage): InboundEvent {
    const headers = stringHeaders(message.headers as Record<string, unknown> | undefined)
    if (message.key) headers['kafka-key'] = message.key.toString('utf8')
    const origin = `kafka:${topic}/${partition}@${message.offset}`
    return {
      source: 'kafka',
      origin,
      // The producer's message-id, else the record's place in the log (stable, unique).
      sourceMessageId: headers['message-id'] || origin,
      receivedAt: new Date().toISOString(),
      headers,
      ...payloadOf(message.value),
    }
  }

  /** Leaves the group after the batches in flight end (or the timeout). */
  async stop(timeoutMs: number): Promise<void> {
    this.#stop.abort()
    await Promise.race([this.#consumer.disconnect(), sleep(timeoutMs)])
    await Promise.race([this.#running, sleep(100)])
  }

  #setUp(up: boolean): void {
    if (up !== this.#up) this.#log.info(up ? 'source.up' : 'source.down', { up })
    this.#up = up
    this.#metrics.sourceUp.set({ source: 'kafka' }, up ? 1 : 0)
  }
}

/** Errors that mean this member's view of the group is out of date: end the batch, let kafkajs rejoin. */
const GROUP_CHANGE = new Set([
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'NOT_COORDINATOR_FOR_GROUP',
])

function errorType(error: unknown): string {
  return String((error as { type?: unknown } | undefined)?.type)
}

function isGroupChange(error: unknown): boolean {
  return GROUP_CHANGE.has(errorType(error))
}
