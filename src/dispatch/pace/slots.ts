import { PACE_MAX_REQUESTS_PER_SECOND } from '../../config.ts'

/**
 * The window in which at most `perSecond` slots start: Resend's second, and a
 * guard of a tenth of it. Slots handed out together do not reach Resend
 * together — each waits for the object's answer, then opens its own request —
 * and a request that arrives a little early in Resend's window must not make
 * it the one too many. The guard costs a tenth of the rate; a 429 would cost a
 * send attempt and stop every sender for its `retry-after`.
 */
export const WINDOW_MS = 1100

/** What a sender asks the pace for: its configured rate, and how long it would wait for a slot. */
export type SlotAsk = { perSecond: number; maxWaitMs: number }

/**
 * The pace's answer. `send`: the sender's slot starts at `at` (epoch ms),
 * `waitMs` from when it was asked. `later`: no slot within the sender's
 * longest wait; come back at `at`. `perSecond` is the rate the slot was paced
 * at: the configured one, or the provider's lower `ratelimit-limit`.
 */
export type Slot =
  | { kind: 'send'; at: number; waitMs: number; perSecond: number }
  | { kind: 'later'; at: number; perSecond: number }

/**
 * The send slots of one provider account: at most `perSecond` slots start in
 * any window of `WINDOW_MS` (a sliding log of the latest starts), none before
 * a hold ends (a 429's `retry-after`, a spent window's `ratelimit-reset`),
 * and the rate is the lower of the configured one and the provider's own
 * limit when it said one. A slot is never earlier than the one before it, so
 * the log stays in order and a rate that rises later cannot squeeze a slot in
 * between two that were paced for a lower one. Times are epoch milliseconds
 * of the caller's clock. Pure: the Durable Object (./send-pace.ts) owns one
 * and keeps what must outlive it.
 */
export class SlotBook {
  /** Starts of the latest slots, oldest first, at most PACE_MAX_REQUESTS_PER_SECOND of them. */
  readonly #starts: number[] = []
  #heldUntil: number
  #limit: number | undefined
  /** Where the next refused sender is sent back to: refusals are spread at the pace, not all sent to one moment. */
  #laterFrom = 0

  constructor(kept: { heldUntil?: number | undefined; limit?: number | undefined } = {}) {
    this.#heldUntil = kept.heldUntil ?? 0
    this.#limit = kept.limit
  }

  /** No slot starts before this time (epoch ms). */
  get heldUntil(): number {
    return this.#heldUntil
  }

  /** The provider's own limit, when it named one (`ratelimit-limit`). */
  get limit(): number | undefined {
    return this.#limit
  }

  /** The rate slots are paced at: the configured one, or the provider's limit when lower. */
  perSecond(configured: number): number {
    return Math.max(1, Math.min(configured, this.#limit ?? configured))
  }

  /**
   * The next slot for a sender asking at `now`: the earliest time that keeps
   * every window within the rate and is past any hold, taken when it is at
   * most `maxWaitMs` away; otherwise nothing is taken and the sender is told
   * when to come back.
   */
  take(now: number, ask: SlotAsk): Slot {
    const perSecond = this.perSecond(ask.perSecond)
    const last = this.#starts.at(-1) ?? 0
    const windowStart = this.#starts.at(-perSecond)
    const at = Math.max(now, this.#heldUntil, last, windowStart === undefined ? 0 : windowStart + WINDOW_MS)
    if (at - now > ask.maxWaitMs) {
      const later = Math.max(at, this.#laterFrom)
      this.#laterFrom = later + WINDOW_MS / perSecond
      return { kind: 'later', at: later, perSecond }
    }
    this.#starts.push(at)
    if (this.#starts.length > PACE_MAX_REQUESTS_PER_SECOND) this.#starts.shift()
    return { kind: 'send', at, waitMs: at - now, perSecond }
  }

  /** Holds every slot until `until` (epoch ms); true when that moved the hold. */
  hold(until: number): boolean {
    if (until <= this.#heldUntil) return false
    this.#heldUntil = until
    return true
  }

  /** Takes the provider's limit (`ratelimit-limit`); true when it is not the one known. */
  limitTo(limit: number): boolean {
    if (limit === this.#limit) return false
    this.#limit = limit
    return true
  }
}
