import { decisionOf, type PipelineCode, PipelineError } from '../errors.ts'

/** What happens to one queue message. */
export type Settlement =
  | { action: 'ack' }
  | { action: 'retry'; delaySeconds: number; code: PipelineCode; error: string }
  | { action: 'dead-letter'; code: PipelineCode; error: string; kind?: string }

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
 * The retry policy (the ArtHunt AsyncAPI's): a failure whose code says `retry` is retried
 * after `delays[attempts - 1]` seconds while attempts remain (events by default
 * 5 s, then 30 s; dispatch 10 attempts up to an hour apart);
 * the attempt after the last delay, or any `dead-letter` code, dead-letters the
 * message with this error.
 *
 * @param attempts - the message's delivery count, starting at 1
 * @param delays - seconds before attempts 2, 3, …
 */
export function settleFailure(
  error: unknown,
  attempts: number,
  delays: readonly number[],
): Exclude<Settlement, { action: 'ack' }> {
  const code = codeOf(error)
  const description = describeError(error)
  const delay = delays[attempts - 1]
  if (decisionOf(code) === 'retry' && delay !== undefined) {
    return { action: 'retry', delaySeconds: delay, code, error: description }
  }
  return { action: 'dead-letter', code, error: description }
}
