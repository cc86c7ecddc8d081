import { vi } from 'vitest'

/**
 * The model's clock: the isolate's `Date` (the Worker's code, its Durable
 * Objects and the stand-ins all read it) held still and moved only by the
 * model, so that a digest window, a throttle hour, a lease or a provider's
 * 24-hour idempotency window passes in one command. Timers stay real: a
 * renewal interval or a pace wait is not the model's to schedule.
 */
export class ModelClock {
  #now: number

  constructor(start: Date) {
    this.#now = start.getTime()
    vi.useFakeTimers({ toFake: ['Date'], now: this.#now })
  }

  /** Now, in milliseconds. */
  get now(): number {
    return this.#now
  }

  get iso(): string {
    return new Date(this.#now).toISOString()
  }

  /** Moves the clock forward by `seconds`. */
  advance(seconds: number): void {
    this.set(this.#now + seconds * 1000)
  }

  /** Moves the clock to `at` (never back). */
  set(at: number): void {
    if (at <= this.#now) return
    this.#now = at
    vi.setSystemTime(at)
  }

  /** The real clock again. */
  stop(): void {
    vi.useRealTimers()
  }
}
