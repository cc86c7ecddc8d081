import type { Logger } from '../log.ts'
import { heldBy } from '../notifications/sql.ts'

/**
 * The lease of one dispatch batch: a fresh token (the lease token, kept in the
 * notification's `claim_token` column) that every claim, renewal and mark of
 * the batch carries, and an expiry renewed every third of its length while
 * sends are running, so that a batch whose sends take longer than the lease
 * (waiting for their slots, one after another) is never taken over by the
 * cron's re-enqueue or a redelivery. When renewals fail (D1 down),
 * `canStartSend` turns false before the lease can run out, and no new send
 * starts under a lease that might already belong to someone else.
 */
export class DispatchLease {
  /** The lease token, kept in `claim_token` of each notification the batch holds. */
  readonly token = crypto.randomUUID()
  readonly #db: D1Database
  readonly #ms: number
  readonly #log: Logger
  #validUntil: number
  #timer: ReturnType<typeof setInterval> | undefined

  constructor(db: D1Database, seconds: number, log: Logger, now = Date.now()) {
    this.#db = db
    this.#ms = seconds * 1000
    this.#log = log
    this.#validUntil = now + this.#ms
  }

  /** Lease end of the claim statements (ISO). */
  get until(): string {
    return new Date(this.#validUntil).toISOString()
  }

  /**
   * True while at least a third of the lease is left: a send started now ends
   * inside it even if no renewal succeeds meanwhile. Through resend a send
   * takes at most RESEND_TIMEOUT_SECONDS, which the configuration holds to a
   * third of DISPATCH_LEASE_SECONDS (src/config.ts). The cloudflare binding
   * takes no timeout: there only the runtime bounds a send.
   */
  get canStartSend(): boolean {
    return this.#validUntil - Date.now() > this.#ms / 3
  }

  /** Renews every third of the lease until `stop()`. */
  start(): void {
    this.#timer ??= setInterval(() => void this.#renew(), this.#ms / 3)
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer)
    this.#timer = undefined
  }

  async #renew(): Promise<void> {
    const now = Date.now()
    try {
      await renewLease(this.#db, this.token, new Date(now + this.#ms).toISOString(), new Date(now).toISOString()).run()
      this.#validUntil = now + this.#ms
    } catch (error) {
      this.#log.warn('dispatch.lease-renewal-failed', { error })
    }
  }
}

/**
 * Extends the lease of every notification still `sending` under `token`.
 * Parameters: claim token, lease until, now.
 */
export function renewLease(db: D1Database, token: string, leaseUntil: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET lease_until = ?2, updated_at = ?3
       WHERE ${heldBy('?1')}`,
    )
    .bind(token, leaseUntil, now)
}
