import type { Logger } from '../log.ts'
import { deadLetterEnvelope } from './dead-letter-envelope.ts'
import { logicalQueueOf } from './names.ts'
import {
  FALLBACK_DELAY_SECONDS,
  type Failure,
  type FailureSettlement,
  type Settlement,
  settle,
  settleFailure,
} from './policy.ts'
import { sendAll } from './send.ts'

/**
 * How each message of one queue batch ends, decided once per message by the
 * consumer and carried out for all of them at the end (`finish`): the one
 * settlement every consumer uses. A failure is turned into a retry or a dead
 * letter by the error table's policy (src/queue/policy.ts) over the
 * consumer's retry delays, or over delays the caller names for one wait of
 * its own (a delivery event waiting for its notification's mark).
 */
export class Settlements {
  readonly #delays: readonly number[]
  readonly #decided = new Map<Message<unknown>, Settlement>()

  /** @param delays - the consumer's retry delays (seconds before each further attempt) */
  constructor(delays: readonly number[]) {
    this.#delays = delays
  }

  /** Ends a message that is done with. */
  ack(message: Message<unknown>): void {
    this.#decided.set(message, { action: 'ack' })
  }

  /** Ends a message with a settlement decided already (a send's outcome). */
  settle(message: Message<unknown>, settlement: Settlement): void {
    this.#decided.set(message, settlement)
  }

  /** Tries a message again after this many seconds, whatever its attempts (a consumer with a backoff of its own). */
  retry(message: Message<unknown>, failure: Failure, delaySeconds: number): void {
    this.#decided.set(message, { action: 'retry', code: failure.code, error: failure.error, delaySeconds })
  }

  /** Ends a message by what it threw: a `retry` code is retried while attempts remain, then a dead letter. */
  fail(message: Message<unknown>, error: unknown, delays: readonly number[] = this.#delays): FailureSettlement {
    const settlement = settleFailure(error, message.attempts, delays)
    this.#decided.set(message, settlement)
    return settlement
  }

  /** Ends a message by a failure of a known code, as the error table decides (as `fail` does). */
  failWith(message: Message<unknown>, failure: Failure, delays: readonly number[] = this.#delays): FailureSettlement {
    const settlement = settle(failure, message.attempts, delays)
    this.#decided.set(message, settlement)
    return settlement
  }

  /** What was decided for a message, if anything. */
  of(message: Message<unknown>): Settlement | undefined {
    return this.#decided.get(message)
  }

  /**
   * Ends every message of the batch exactly once: `ack()`, `retry()` with its
   * delay, or a dead letter on `notify-dlq` followed by `ack()`. Dead letters
   * go out in one `sendBatch`; if that fails, their messages are retried
   * instead of acked (after the policy's `FALLBACK_DELAY_SECONDS`), so a
   * message is never acked before it reached the queue or the dead-letter
   * store. A message nothing was decided for is a bug: retried, so it is kept.
   * When every message ends alike, one `ackAll()` or `retryAll()` says it.
   */
  async finish(batch: MessageBatch<unknown>, deps: { dlq: Queue; log: Logger }): Promise<void> {
    const dead = batch.messages.filter((message) => this.#decided.get(message)?.action === 'dead-letter')
    let deadLettersSent = true
    if (dead.length > 0) {
      const envelopes = dead.map((message) => {
        const settlement = this.#decided.get(message) as Extract<Settlement, { action: 'dead-letter' }>
        return deadLetterEnvelope(logicalQueueOf(batch.queue), message, settlement)
      })
      try {
        await sendAll(
          deps.dlq,
          envelopes.map((body) => ({ body })),
        )
      } catch (error) {
        deadLettersSent = false
        deps.log.error('dead-letter.send-failed', { queue: batch.queue, count: dead.length, error })
      }
    }
    // What each message ends with: acked, or retried after its delay.
    const ends = batch.messages.map((message): number | 'ack' => {
      const settlement = this.#decided.get(message)
      if (settlement === undefined) {
        deps.log.error('message.unsettled', { queue: batch.queue, messageId: message.id })
        return FALLBACK_DELAY_SECONDS
      }
      if (settlement.action === 'ack') return 'ack'
      if (settlement.action === 'retry') return settlement.delaySeconds
      return deadLettersSent ? 'ack' : FALLBACK_DELAY_SECONDS
    })
    // The common case in one call (one per message is a call into the runtime each): every message acked,
    // or every one retried after the same delay.
    const [first] = ends
    if (first !== undefined && ends.every((end) => end === first)) {
      if (first === 'ack') batch.ackAll()
      else batch.retryAll({ delaySeconds: first })
      return
    }
    batch.messages.forEach((message, index) => {
      const end = ends[index]
      if (end === 'ack') message.ack()
      else message.retry({ delaySeconds: end })
    })
  }
}
