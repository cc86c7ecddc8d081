import { type Config, configOf } from '../config.ts'
import type { Logger } from '../log.ts'
import { type Failure, type Settlement, settle, settleFailure } from '../queue/policy.ts'
import { DispatchLease } from './lease.ts'
import type { TransportPause } from './pause.ts'

/**
 * The state of one `notify-dispatch` batch: its clock, its lease (token and
 * expiry), and each message's settlement, decided here and nowhere else.
 */
export class DispatchRun {
  readonly config: Config
  readonly now: Date
  readonly nowIso: string
  readonly lease: DispatchLease
  readonly env: Env
  readonly log: Logger
  /** The transport's pause, as the claim stage read it (undefined: not paused). */
  pause: TransportPause | undefined
  readonly #settlements = new Map<Message<unknown>, Settlement>()

  constructor(env: Env, log: Logger) {
    this.config = configOf(env)
    this.now = new Date()
    this.nowIso = this.now.toISOString()
    this.lease = new DispatchLease(env.DB, this.config.DISPATCH_LEASE_SECONDS, log, this.now.getTime())
    this.env = env
    this.log = log
  }

  /** Ends a message with this settlement. */
  settle(message: Message<unknown>, settlement: Settlement): void {
    this.#settlements.set(message, settlement)
  }

  /**
   * Ends a message by what it threw, as the error table decides (src/queue/policy.ts)
   * under the dispatch retry policy: a `retry` code is retried while attempts remain, then a dead letter.
   */
  fail(message: Message<unknown>, error: unknown): void {
    const settlement = settleFailure(error, message.attempts, this.config.DISPATCH_RETRY_DELAYS_SECONDS)
    // A failure of ours (D1, the queue) is otherwise seen only in what it settles to.
    this.log.warn('dispatch.failed', { messageId: message.id, code: settlement.code, error: settlement.error })
    this.settle(message, settlement)
  }

  /** Ends a message by a failure of a known code, as the error table decides (as `fail` does). */
  failWith(message: Message<unknown>, failure: Failure): void {
    this.settle(message, settle(failure, message.attempts, this.config.DISPATCH_RETRY_DELAYS_SECONDS))
  }

  /** Every message's settlement. */
  settlements(): ReadonlyMap<Message<unknown>, Settlement> {
    return this.#settlements
  }
}
