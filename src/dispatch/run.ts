import { type Config, configOf } from '../config.ts'
import type { Logger } from '../log.ts'
import type { ClaimedRow } from '../notifications/claim.ts'
import type { FailureSettlement, Settlement } from '../queue/policy.ts'
import type { Outgoing } from '../queue/send.ts'
import { Settlements } from '../queue/settlements.ts'
import { DispatchLease } from './lease.ts'
import type { TransportState } from './pause.ts'

/** A notification this batch claimed, to send. */
export type ToSend = { message: Message<unknown>; row: ClaimedRow }

/** A notification not due yet, or to try again: back on the queue with its delay, its message acked after that. */
export type Later = { message: Message<unknown>; outgoing: Outgoing }

/** A message whose digest is due to close. */
export type ToClose = { message: Message<unknown>; id: string }

/** A message whose email's wait for its in-app item has ended, to be decided. */
export type ToEscalate = { message: Message<unknown>; id: string }

/** A notification the send stage tries; `message` is absent for a bundle member claimed with its bundle, not by its own message. */
export type Member = { row: ClaimedRow; message: Message<unknown> | undefined }

/** A bundle to send: several emails in one request to the provider, under the bundle's id as its idempotency key. */
export type Bundle = { id: string; members: Member[] }

/**
 * What became of one notification the send stage tried, once its result was
 * marked: its message's settlement, and its next try's message, if any (for
 * a member without a message of its own here, that message alone).
 */
export type Marked = { member: Member; settlement: Settlement; next?: Outgoing }

/**
 * The state of one `notify-dispatch` batch: its clock, its lease (token and
 * expiry), and each message's settlement (the queue's `Settlements`, under
 * the dispatch retry policy, DISPATCH_RETRY_DELAYS_SECONDS).
 */
export class DispatchRun extends Settlements {
  readonly config: Config
  readonly now: Date
  readonly nowIso: string
  readonly lease: DispatchLease
  readonly env: Env
  readonly log: Logger
  /** Each configured transport's pause and circuit, as the claim stage read them. */
  transports: Map<string, TransportState> = new Map()

  constructor(env: Env, log: Logger) {
    const config = configOf(env)
    super(config.DISPATCH_RETRY_DELAYS_SECONDS)
    this.config = config
    this.now = new Date()
    this.nowIso = this.now.toISOString()
    this.lease = new DispatchLease(env.DB, this.config.DISPATCH_LEASE_SECONDS, log, this.now.getTime())
    this.env = env
    this.log = log
  }

  /** As `Settlements.fail`, logged: a failure of ours (D1, the queue) is otherwise seen only in what it settles to. */
  override fail(message: Message<unknown>, error: unknown): FailureSettlement {
    const settlement = super.fail(message, error)
    this.log.warn('dispatch.failed', { messageId: message.id, code: settlement.code, error: settlement.error })
    return settlement
  }
}
