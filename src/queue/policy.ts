import { decisionOf, type PipelineCode, PipelineError } from '../errors.ts'

/**
 * What becomes of a queue message that failed, decided by the error table
 * (`ERRORS` in src/errors.ts) and nowhere else: every consumer settles its
 * failures here, and every delay it gives a queue passes through here.
 */

/**
 * Longest delay Cloudflare Queues accept for one message, when it is sent or
 * retried: 12 hours (`delaySeconds`, https://developers.cloudflare.com/queues/platform/limits/).
 * Later revisions of that page give 24 hours; the lower figure is the one kept,
 * so a delay valid on an account under either is valid here.
 */
export const MAX_DELAY_SECONDS = 43_200

/**
 * How long a message waits when it could not end as its settlement says:
 * notify-dlq did not take its dead letter, its consumer left it unsettled (a
 * bug), or its whole batch failed before settling. Long enough for a queue or
 * D1 hiccup to pass, short enough that nothing waits long for a transient
 * fault; the dead-letter consumer doubles it (`deadLetterStoreDelay`).
 */
export const FALLBACK_DELAY_SECONDS = 30

/** Longest wait between attempts to store a dead letter while D1 refuses it. */
const DEAD_LETTER_STORE_MAX_DELAY_SECONDS = 3600

/** A delay as a queue takes it: whole seconds, at most `MAX_DELAY_SECONDS`. */
export function queueDelay(seconds: number): number {
  return Math.min(MAX_DELAY_SECONDS, Math.ceil(seconds))
}

/**
 * The delay before the dead-letter consumer tries again to store a dead letter
 * D1 did not take: `FALLBACK_DELAY_SECONDS`, doubled on each delivery up to an
 * hour (30 s, 1, 2, 4 min … 1 h), since notify-dlq has no queue behind it and
 * its 100 retries must outlast a D1 outage.
 *
 * @param attempts - the message's delivery count, starting at 1
 */
export function deadLetterStoreDelay(attempts: number): number {
  const grown = FALLBACK_DELAY_SECONDS * 2 ** Math.min(attempts - 1, 10)
  return queueDelay(Math.min(DEAD_LETTER_STORE_MAX_DELAY_SECONDS, grown))
}

/** Why a message failed: its code, a description, and the notification kind it was about when known. */
export type Failure = { code: PipelineCode; error: string; kind?: string }

/**
 * How a failure ends its message, as its code's decision says: `retry` —
 * tried again after `delaySeconds`; `dead-letter` — sent to notify-dlq, then
 * acked; `ack` — done with, no retry and no dead letter (`skip`: not sending
 * is the right outcome; `wait`: the notification's row holds it until what it
 * waits for is fixed).
 */
export type FailureSettlement =
  | { action: 'ack'; code: PipelineCode; error: string }
  | { action: 'retry'; delaySeconds: number; code: PipelineCode; error: string }
  | { action: 'dead-letter'; code: PipelineCode; error: string; kind?: string }

/** What happens to one queue message: done with, or ended by a failure. */
export type Settlement = { action: 'ack' } | FailureSettlement

/** The code of anything thrown: a `PipelineError` knows its own; anything else is `NTF_UNEXPECTED`. */
export function codeOf(error: unknown): PipelineCode {
  return error instanceof PipelineError ? error.code : 'NTF_UNEXPECTED'
}

/** A one-line description of anything thrown, cut to a size a dead letter can carry. */
export function describeError(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  return text.length > 2000 ? `${text.slice(0, 1997)}...` : text
}

/**
 * The delay before attempt `attempts + 1` (the ArtHunt AsyncAPI's retry
 * policy: events by default 5 s, then 30 s; dispatch 10 attempts up to an
 * hour apart), or undefined once the attempts are used up.
 *
 * @param attempts - the attempts made so far, starting at 1
 * @param delays - seconds before attempts 2, 3, …
 */
export function retryDelay(attempts: number, delays: readonly number[]): number | undefined {
  const delay = delays[attempts - 1]
  return delay === undefined ? undefined : queueDelay(delay)
}

/**
 * Settles a failure by its code's decision in the error table: `retry` while
 * attempts remain (`retryDelay`), then a dead letter carrying this failure;
 * `dead-letter` at once; `skip` and `wait` acked, without a retry or a dead
 * letter.
 *
 * @param attempts - the attempts made so far, starting at 1 (a message's delivery count, or a row's)
 * @param delays - seconds before attempts 2, 3, …
 */
export function settle(failure: Failure, attempts: number, delays: readonly number[]): FailureSettlement {
  const { code, error, kind } = failure
  const deadLetter = { action: 'dead-letter', code, error, ...(kind ? { kind } : {}) } as const
  const decision = decisionOf(code)
  switch (decision) {
    case 'retry': {
      const delaySeconds = retryDelay(attempts, delays)
      return delaySeconds === undefined ? deadLetter : { action: 'retry', delaySeconds, code, error }
    }
    case 'dead-letter':
      return deadLetter
    case 'skip':
    case 'wait':
      return { action: 'ack', code, error }
    default:
      return decision satisfies never
  }
}

/**
 * Settles anything thrown by its code (`codeOf`) and description, as `settle` does.
 *
 * @param attempts - the message's delivery count, starting at 1
 * @param delays - seconds before attempts 2, 3, …
 */
export function settleFailure(error: unknown, attempts: number, delays: readonly number[]): FailureSettlement {
  return settle({ code: codeOf(error), error: describeError(error) }, attempts, delays)
}
