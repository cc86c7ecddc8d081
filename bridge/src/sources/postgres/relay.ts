import type { InboundEvent } from '@notify-edge/contracts'
import postgres from 'postgres'
import type { BridgeConfig } from '../../config.ts'
import type { Logger } from '../../log.ts'
import type { Metrics } from '../../metrics.ts'
import { backoffMs, sleep } from '../../sink/backoff.ts'
import type { Sink } from '../../sink/sink.ts'
import { payloadOf } from '../payload.ts'
import {
  claimOutboxBatch,
  countUntransferred,
  markTransferred,
  type OutboxRow,
  releaseClaim,
  renewClaim,
} from './sql.ts'

/**
 * The PostgreSQL transactional-outbox source (replacing the PushOccurrence relay,
 * without its non-atomic MongoDB fallback). NOTIFY only wakes it: rows are
 * claimed in batches, oldest first, under a lease (claim token + expiry,
 * renewed while the batch is on its way) in one short statement; forwarded
 * with no transaction open; then marked transferred — with how they went,
 * as themselves or as markers — in another short statement guarded by the
 * token. A row is marked only after the Worker accepted it; a bridge that
 * dies leaves its claim to expire, and any bridge takes it over. A sweep runs
 * at start, after every (re)connect of the LISTEN connection and on a timer,
 * so notifications missed meanwhile lose nothing. While the sink cannot
 * deliver, the relay waits: rows simply stay untransferred, and the database
 * sees no open transaction.
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
  readonly #claims = new Set<string>()
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
   * closes the connections; a batch that could not finish is released and
   * stays untransferred.
   */
  async stop(timeoutMs: number): Promise<void> {
    this.#stop.abort()
    for (const wake of this.#waiters) wake()
    await Promise.race([this.#loop, sleep(timeoutMs)])
    // A batch still on its way is given back, so another bridge need not wait out the lease.
    for (const token of this.#claims) await releaseClaim(this.#sql, this.#config.PG_SCHEMA, token).catch(() => {})
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
            this.#log.info('source.connected', { channel: this.#config.PG_CHANNEL })
            this.#wake()
          },
        )
        this.#unlisten = listening.unlisten
        return
      } catch (error) {
        this.#setUp(false)
        const wait = backoffMs(attempt)
        this.#log.warn('source.disconnected', { channel: this.#config.PG_CHANNEL, error, waitMs: Math.round(wait) })
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
        if (claimed > 0) this.#log.debug('outbox.swept', { claimed })
        await this.#idle()
      } catch (error) {
        this.#setUp(false)
        const wait = backoffMs(failures)
        failures += 1
        this.#log.warn('source.error', { during: 'claim', error, waitMs: Math.round(wait) })
        await sleep(wait, this.#stop.signal)
      }
    }
  }

  /**
   * Claim (short statement), forward with no transaction open while renewing
   * the lease, mark (short statement, under the claim token).
   */
  async #relayBatch(): Promise<number> {
    const { PG_SCHEMA: schema, PG_LEASE_MS: leaseMs, PG_BATCH_SIZE: limit, PG_DATA_WAIT_MS: dataWaitMs } = this.#config
    const token = crypto.randomUUID()
    const rows = await claimOutboxBatch(this.#sql, schema, token, leaseMs, limit, dataWaitMs)
    if (rows.length === 0) return 0
    const bodiless = rows.filter((row) => row.message_body === null).map((row) => row.message_id)
    if (bodiless.length > 0) {
      // Forwarded without a body all the same: the Worker dead-letters them rather than they wait forever.
      this.#log.warn('outbox.rows-without-data', {
        rows: bodiless.length,
        messageIds: bodiless.slice(0, 20),
        dataWaitMs,
      })
    }
    this.#claims.add(token)
    const renewal = setInterval(() => {
      renewClaim(this.#sql, schema, token, leaseMs).catch((error) => this.#log.warn('outbox.renewal-failed', { error }))
    }, leaseMs / 3)
    try {
      const deliveries = await this.#sink.send(rows.map((row) => this.#toInbound(row)))
      const forwardedAs = deliveries.map((delivery) =>
        delivery.as === 'marker' ? `marker:${delivery.marker}` : delivery.as,
      )
      const marked = await markTransferred(
        this.#sql,
        schema,
        token,
        rows.map((row) => row.message_id),
        forwardedAs,
      )
      if (marked < rows.length) {
        // The claim expired before the Worker accepted its batch, and another bridge took the rows over.
        this.#log.warn('outbox.claim-expired', { claimed: rows.length, marked })
      }
      return rows.length
    } finally {
      clearInterval(renewal)
      this.#claims.delete(token)
    }
  }

  /**
   * An outbox row as an inbound event, its body the stored bytes (UTF-8 text,
   * else base64). A row that still has no data row after `PG_DATA_WAIT_MS`
   * (the claim passes it over until then) travels empty, so the Worker
   * dead-letters it instead of it being skipped silently.
   */
  #toInbound(row: OutboxRow): InboundEvent {
    const payload = payloadOf(row.message_body)
    const problem =
      row.message_body === null
        ? `no message_queue_log_data row after ${this.#config.PG_DATA_WAIT_MS} ms`
        : payload.encoding === 'base64' && row.message_body.byteLength > 0
          ? 'message_body is not UTF-8'
          : undefined
    return {
      source: 'postgres',
      origin: `postgres:${this.#config.PG_SCHEMA}.message_queue_log/${row.message_id}`,
      sourceMessageId: row.message_id,
      receivedAt: new Date().toISOString(),
      headers: problem ? { 'x-outbox-problem': problem } : {},
      ...payload,
    }
  }

  #setUp(up: boolean): void {
    if (up !== this.#up) this.#log.info(up ? 'source.up' : 'source.down', { up })
    this.#up = up
    this.#metrics.sourceUp.set({ source: 'postgres' }, up ? 1 : 0)
  }
}
