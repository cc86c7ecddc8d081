import type { Mail } from '../mime.ts'

/** What a transport reports for a message it accepted. */
export type Sent = { providerId: string; raw: string; messageId: string }

/** Sends one mail; throws `SendError` to say whether trying again can help. */
export type Transport = { name: string; send(mail: Mail): Promise<Sent> }

/**
 * What a refused send means: `transient` — try again (not sooner than
 * `delaySeconds` when the provider says so); `permanent` — the notification
 * fails; `suppressed` — the provider will not mail this address, which joins
 * the suppression list.
 */
export type SendOutcome = 'transient' | 'permanent' | 'suppressed'

/** A send failure that knows what it means for the notification. */
export class SendError extends Error {
  readonly outcome: SendOutcome
  /** The shortest wait before trying again, when the provider named one (rate and daily limits). */
  readonly delaySeconds: number | undefined

  constructor(message: string, outcome: SendOutcome, options?: { cause?: unknown; delaySeconds?: number | undefined }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'SendError'
    this.outcome = outcome
    this.delaySeconds = options?.delaySeconds
  }

  /** Whether trying again cannot help. */
  get permanent(): boolean {
    return this.outcome !== 'transient'
  }
}
