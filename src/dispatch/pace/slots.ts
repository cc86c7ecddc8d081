import { PACE_MAX_REQUESTS_PER_SECOND } from '../../config.ts'

/**
 * The window in which at most `perSecond` slots start: Resend's second, and a
 * guard of a tenth of it. Slots start one `WINDOW_MS / perSecond` apart (220
 * ms at Resend's default of 5), so five starts span 880 ms and a sixth comes
 * 1,100 ms after the first. The guard is for the way from a slot to Resend:
 * each sender waits for the object's answer, then builds and opens its own
 * request, so requests reach Resend up to a few tens of milliseconds off
 * their slots; a sixth request that arrived early enough to share a second
 * of Resend's with the first would be refused. The guard costs a tenth of the
 * rate; a 429 would cost a send attempt and stop every sender for its
 * `retry-after`.
 */
export const WINDOW_MS = 1100

/**
 * How long the pace stays careful after a sign that someone else spends the
 * team's rate (or that our requests reach Resend further apart than their
 * slots): a 429 for the rate, or a window Resend counted fuller than our own
 * slots make it.
 */
export const CAREFUL_MS = 60_000

/** What a sender asks the pace for: its configured rate, and how long it would wait for a slot. */
export type SlotAsk = { perSecond: number; maxWaitMs: number }

/**
 * The pace's answer. `send`: the sender's slot starts at `at` (epoch ms),
 * `waitMs` from when it was asked; `startedInWindow` slots, this one among
 * them, start in the `WINDOW_MS` up to it — what Resend's count of the team's
 * requests should hold when it answers this one, if nobody else sends for the
 * team; `careful` while the pace has lately seen someone else spend it.
 * `later`: no slot within the sender's longest wait; come back at `at`.
 * `perSecond` is the rate the slot was paced at: the configured one, or the
 * provider's lower `ratelimit-limit`.
 */
export type Slot =
  | { kind: 'send'; at: number; waitMs: number; perSecond: number; startedInWindow: number; careful: boolean }
  | { kind: 'later'; at: number; perSecond: number }

/**
 * The send slots of one provider account: each starts `WINDOW_MS / perSecond`
 * after the one before it — spaced from their starts, so at most `perSecond`
 * start in any window of `WINDOW_MS` — none before a hold ends (a 429's
 * `retry-after`, or the `ratelimit-reset` of a window someone else spent),
 * and the rate is the lower of the configured one and the provider's own
 * limit when it said one. A slot is never earlier than the one before it, so
 * a rate that rises later cannot squeeze a slot in between two that were
 * paced for a lower one. Times are epoch milliseconds of the caller's clock.
 * Pure: the Durable Object (./send-pace.ts) owns one and keeps what must
 * outlive it.
 */
export class SlotBook {
  /** Starts of the latest slots, oldest first, at most PACE_MAX_REQUESTS_PER_SECOND of them. */
  readonly #starts: number[] = []
  #heldUntil: number
  #limit: number | undefined
  /** Until when a full window holds every sender whoever filled it (CAREFUL_MS). */
  #carefulUntil = 0
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
   * The next slot for a sender asking at `now`: one step of the pace after
   * the last slot, past any hold, taken when it is at most `maxWaitMs` away;
   * otherwise nothing is taken and the sender is told when to come back.
   */
  take(now: number, ask: SlotAsk): Slot {
    const perSecond = this.perSecond(ask.perSecond)
    const step = WINDOW_MS / perSecond
    const last = this.#starts.at(-1)
    const at = Math.max(now, this.#heldUntil, last === undefined ? 0 : last + step)
    if (at - now > ask.maxWaitMs) {
      const later = Math.max(at, this.#laterFrom)
      this.#laterFrom = later + step
      return { kind: 'later', at: later, perSecond }
    }
    this.#starts.push(at)
    if (this.#starts.length > PACE_MAX_REQUESTS_PER_SECOND) this.#starts.shift()
    let startedInWindow = 0
    while ((this.#starts.at(-1 - startedInWindow) ?? -Infinity) > at - WINDOW_MS) startedInWindow += 1
    return { kind: 'send', at, waitMs: at - now, perSecond, startedInWindow, careful: at < this.#carefulUntil }
  }

  /** Keeps the pace careful until `until` (epoch ms); true when that moved it. */
  beCareful(until: number): boolean {
    if (until <= this.#carefulUntil) return false
    this.#carefulUntil = until
    return true
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
