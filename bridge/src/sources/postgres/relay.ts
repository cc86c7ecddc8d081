import type { Logger } from 'pino'
import postgres from 'postgres'
import type { InboundEvent } from '../../../../src/contracts/index.ts'
import type { BridgeConfig } from '../../config.ts'
import type { Metrics } from '../../metrics.ts'
import { backoffMs, sleep } from '../../sink/backoff.ts'
import type { Sink } from '../../sink/sink.ts'
import { claimOutboxBatch, countUntransferred, markTransferred, type OutboxRow } from './sql.ts'

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

/**
 * The PostgreSQL transactional-outbox source (seed `pushoccurrence-outbox-relay`,
 * without its non-atomic MongoDB fallback). NOTIFY only wakes it: rows are
 * claimed in batches, oldest first, `FOR UPDATE SKIP LOCKED` (safe with many
 * bridges), forwarded, marked transferred and committed — in one transaction,
 * so a row is marked only after the Worker accepted it, and a crash leaves it
 * untransferred. A sweep runs at start, after every (re)connect of the LISTEN
 * connection and on a timer, so notifications missed meanwhile lose nothing.
 * While the sink cannot deliver, the relay waits: rows simply stay untransferred.
 */
export class PostgresRelay {
  readonly name = 'postgres'
  readonly #config: BridgeConfig
  readonly #sink: Sink
  readonly #log: Logger
  readonly #metrics: Metrics
  readonly #sql: postgres.Sql
  readonly #stop = new AbortController()
  readonly #waiters = new Set<() => void>()
  #woken = true
  #up = false
  #loop: Promise<void> | undefined
  #unlisten: (() => Promise<void>) | undefined

  constructor(config: BridgeConfig, sink: Sink, log: Logger, metrics: Metrics) {
    this.#config = config
    this.#sink = sink
    this.#log = log.child({ source: 'postgres' })
    this.#metrics = metrics
    this.#sql = postgres(config.PG_URL as string, {
      max: config.PG_CLAIMERS + 1,
      connect_timeout: 10,
      idle_timeout: 60,
      onnotice: () => {},
      connection: { application_name: 'notify-edge-bridge' },
    })
    metrics.sourceUp.set({ source: 'postgres' }, 0)
  }

  /** True while the last claim (or LISTEN) succeeded. */
  get up(): boolean {
    return this.#up
  }

  /** Starts listening (notify mode) and the claim loop. */
  start(): void {
    // Several claim loops: while one batch is on its way to the Worker, the next is claimed
    // (SKIP LOCKED keeps them apart), so the database and the sink work at the same time.
    this.#loop = Promise.all(Array.from({ length: this.#config.PG_CLAIMERS }, () => this.#run())).then(() => undefined)
    if (this.#config.PG_MODE === 'notify') void this.#listen()
  }

  /**
   * Stops claiming, lets the batch in flight finish (up to `timeoutMs`), then
   * closes the connections; a batch that could not finish is rolled back and
   * stays untransferred.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.#stop.abort()
    for (const wake of this.#waiters) wake()
    await Promise.race([this.#loop, sleep(timeoutMs)])
    await this.#unlisten?.().catch(() => {})
    await this.#sql.end({ timeout: 1 })
  }

  async #listen(): Promise<void> {
    for (let attempt = 0; !this.#stop.signal.aborted; attempt += 1) {
      try {
        const listening = await this.#sql.listen(
          this.#config.PG_CHANNEL,
          () => this.#wake(),
          () => {
            // (Re)connected: anything notified while we were away is found by this sweep.
            this.#log.info({ channel: this.#config.PG_CHANNEL }, 'source:connected listening')
            this.#wake()
          },
        )
        this.#unlisten = listening.unlisten
        return
      } catch (error) {
        this.#setUp(false)
        const wait = backoffMs(attempt)
        this.#log.warn({ error, waitMs: Math.round(wait) }, 'source:disconnected LISTEN failed; retrying')
        await sleep(wait, this.#stop.signal)
      }
    }
  }

  #wake(): void {
    this.#woken = true
    for (const wake of this.#waiters) wake()
  }

  /** Waits for a NOTIFY, the sweep timer or stop. */
  async #idle(): Promise<void> {
    if (this.#woken || this.#stop.signal.aborted) return
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer)
        this.#waiters.delete(wake)
        resolve()
      }
      const timer = setTimeout(wake, this.#config.PG_SWEEP_INTERVAL_MS)
      this.#waiters.add(wake)
    })
    void countUntransferred(this.#sql, this.#config.PG_SCHEMA).then(
      (count) => this.#metrics.untransferred.set(count),
      () => {},
    )
  }

  async #run(): Promise<void> {
    let failures = 0
    while (!this.#stop.signal.aborted) {
      try {
        this.#woken = false
        const claimed = await this.#relayBatch()
        failures = 0
        this.#setUp(true)
        if (claimed === this.#config.PG_BATCH_SIZE) {
          // A full batch: there is probably more, for the sibling loops too.
          this.#wake()
          continue
        }
        if (claimed > 0) this.#log.debug({ claimed }, 'outbox:swept')
        await this.#idle()
      } catch (error) {
        this.#setUp(false)
        const wait = backoffMs(failures)
        failures += 1
        this.#log.warn({ error, waitMs: Math.round(wait) }, 'source:error claim failed; retrying')
        await sleep(wait, this.#stop.signal)
      }
    }
  }

  /** One transaction: claim, forward (until the Worker accepts), mark, commit. */
  async #relayBatch(): Promise<number> {
    return this.#sql.begin(async (tx) => {
      const rows = await claimOutboxBatch(tx, this.#config.PG_SCHEMA, this.#config.PG_BATCH_SIZE)
      if (rows.length === 0) return 0
      await this.#sink.send(rows.map((row) => this.#toInbound(row)))
      await markTransferred(
        tx,
        this.#config.PG_SCHEMA,
        rows.map((row) => row.message_id),
      )
      return rows.length
    })
  }

  /**
   * An outbox row as an inbound event. A body that is not UTF-8 travels as
   * base64, and a row without its data row travels empty, so the Worker
   * dead-letters it instead of it being skipped silently.
   */
  #toInbound(row: OutboxRow): InboundEvent {
    const base = {
      source: 'postgres' as const,
      origin: `postgres:${this.#config.PG_SCHEMA}.message_queue_log/${row.message_id}`,
      sourceMessageId: row.message_id,
      receivedAt: new Date().toISOString(),
    }
    if (row.message_body === null) {
      return { ...base, headers: { 'x-outbox-problem': 'no message_queue_log_data row' }, body: '', encoding: 'base64' }
    }
    try {
      return { ...base, headers: {}, body: utf8.decode(row.message_body) }
    } catch {
      return {
        ...base,
        headers: { 'x-outbox-problem': 'message_body is not UTF-8' },
        body: row.message_body.toString('base64'),
        encoding: 'base64',
      }
    }
  }

  #setUp(up: boolean): void {
    if (up !== this.#up) this.#log.info({ up }, up ? 'source:up' : 'source:down')
    this.#up = up
    this.#metrics.sourceUp.set({ source: 'postgres' }, up ? 1 : 0)
  }
}
