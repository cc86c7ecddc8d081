import type { PipelineCode } from '../../errors.ts'
import type { Mail } from '../../mail/mime.ts'
import type { ClaimedRow } from '../../notifications/claim.ts'
import { describeError } from '../../queue/policy.ts'

/** What a transport reports for a message it accepted: the provider's id, the exact message and its Message-ID. */
export type Sent = { providerId: string; raw: string; messageId: string }

/** What a courier reports for what it delivered: as `Sent`, where an in-app item has no provider id and no message to keep (`raw` empty). */
export type Delivered = Omit<Sent, 'providerId'> & { providerId: string | null }

/**
 * What the send stage hands a claimed notification to: an email transport,
 * through the mail made of the row (src/dispatch/stages/send.ts `emailCourier`),
 * or the recipient's in-app feed (./in-app.ts). `deliverBundle`, when there,
 * sends several in one request under one idempotency key.
 */
export type Courier = {
  name: string
  deliver(row: ClaimedRow): Promise<Delivered | undefined>
  deliverBundle?(rows: readonly ClaimedRow[], key: string): Promise<Delivered[]>
}

/**
 * Sends one mail; throws `SendError` to say whether trying again can help. A
 * transport that can send several mails in one request has `sendBatch`: all
 * of them under one idempotency key, answered one `Sent` per mail in their
 * order, or refused as a whole.
 */
export type Transport = {
  name: string
  send(mail: Mail): Promise<Sent>
  sendBatch?(mails: readonly Mail[], key: string): Promise<Sent[]>
}

/**
 * What a refused send means: `transient` — try again (not sooner than
 * `delaySeconds` when the provider says so); `permanent` — a refusal about
 * this message or its recipient: the notification fails, as a dead letter an
 * operator can replay; `suppressed` — the provider will not mail this address,
 * which joins the suppression list; `paused` — a refusal about us (the key,
 * a missing header, the sender or its domain, a quota): nothing through this
 * transport can succeed until it is fixed, so the transport pauses and the
 * notification waits; `unknown` — the provider may have taken it (a lost
 * answer through a transport without an idempotency key): not sent again
 * until its delivery events had their chance.
 */
export type SendOutcome = 'transient' | 'permanent' | 'suppressed' | 'paused' | 'unknown'

/** A send failure that knows what it means for the notification. */
export class SendError extends Error {
  readonly outcome: SendOutcome
  /** The shortest wait before trying again, when the provider named one (rate and daily limits). */
  readonly delaySeconds: number | undefined
  /** The provider's own name for the refusal (an error code, else the HTTP status), when it gave one. */
  readonly providerCode: string | undefined
  /** The pipeline code of a refusal that has its own (a message over a documented limit). */
  readonly code: PipelineCode | undefined
  /** The provider said for certain that nothing was sent under the request's key (it refused the request itself). */
  readonly nothingSent: boolean
  /** The failure says the provider may be down (a 5xx, no answer, an internal error): it counts against its circuit (src/dispatch/circuit.ts). */
  readonly outage: boolean

  constructor(
    message: string,
    outcome: SendOutcome,
    options?: {
      cause?: unknown
      delaySeconds?: number | undefined
      providerCode?: string | undefined
      code?: PipelineCode
      nothingSent?: boolean
      outage?: boolean
    },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'SendError'
    this.outcome = outcome
    this.delaySeconds = options?.delaySeconds
    this.providerCode = options?.providerCode
    this.code = options?.code
    this.nothingSent = options?.nothingSent ?? false
    this.outage = options?.outage ?? false
  }
}

/** What a send threw, as a `SendError`: anything not already one is a transient failure that may be tried again. */
export function sendErrorOf(caught: unknown): SendError {
  return caught instanceof SendError
    ? caught
    : new SendError(describeError(caught), 'transient', { cause: caught, outage: true })
}
