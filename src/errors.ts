import type { RefusalIssue } from '@notify-edge/contracts'

/**
 * Every error code of notify-edge, in one table with what is done about it.
 *
 * Pipeline codes (`NTF_*`) end a queue message: `retry` follows the retry
 * policy of its queue (RETRY_DELAYS_SECONDS or DISPATCH_RETRY_DELAYS_SECONDS, then a
 * dead letter carrying the last error), `dead-letter`
 * skips retries because trying again cannot help,
 * `skip` ends it without sending because the recipient must not be mailed,
 * `wait` holds the notification without counting a try until what it waits
 * for is fixed. src/queue/policy.ts applies these decisions, for every consumer.
 * API codes carry the HTTP
 * status they answer with. docs/operating.md lists this table; a test keeps the two equal.
 */
export const ERRORS = {
  NTF_INVALID_PAYLOAD: {
    decision: 'dead-letter',
    description: 'The event does not match its contract; the message names the field.',
  },
  NTF_PAYLOAD_TOO_LARGE: {
    decision: 'dead-letter',
    description:
      'The payload did not fit a queue message; the bridge sent a marker and the original stays at its source.',
  },
  NTF_INGEST_REJECTED: {
    decision: 'dead-letter',
    description: 'The ingest route refused this event; the bridge sent a marker so that it is not lost from sight.',
  },
  NTF_TEMPLATE_NOT_RESOLVED: {
    decision: 'dead-letter',
    description: 'No active template for (kind, locale, channel), even after locale fallback.',
  },
  NTF_TEMPLATE_INVALID: {
    decision: 'dead-letter',
    description:
      'The active template failed to render for this event: an unknown filter, or a TEMPLATE_* limit it broke (named in the error); fix it, then replay.',
  },
  NTF_CONTACT_NOT_FOUND: {
    decision: 'dead-letter',
    description:
      'The recipient was still not in the contact replica after CONTACT_WAIT_HOURS (the notification waited `awaiting-contact`, released at once if the contact had arrived): it ends `undeliverable` as a dead letter; add the contact, then replay it.',
  },
  NTF_DEPENDENCY_FAILED: {
    decision: 'retry',
    description: 'D1, KV or a queue failed; retried.',
  },
  NTF_UNEXPECTED: {
    decision: 'retry',
    description: 'An error without a code (a bug); retried like an infrastructure failure so nothing is lost.',
  },
  NTF_SEND_TRANSIENT: {
    decision: 'retry',
    description: 'The email transport failed in a way that may pass (timeout, 5xx, rate limit).',
  },
  NTF_BATCH_REFUSED: {
    decision: 'retry',
    description:
      'Resend refused a batch of emails as invalid, so nothing of it was sent: its notifications are tried again, each alone, so that the one at fault fails by itself.',
  },
  NTF_SEND_UNKNOWN: {
    decision: 'wait',
    description:
      'Whether a send went out is not known (a lost answer, a claim that ended without a result) and a retry cannot be answered instead of sent: through a transport without an idempotency key, or through resend when the retry would come past its idempotency window (RESEND_IDEMPOTENCY_WINDOW_HOURS). The notification waits `unknown`; a delivery event for it settles it as sent; without one after UNKNOWN_OUTCOME_SECONDS, the cloudflare binding sends it again, and through resend it ends `failed` as a dead letter an operator decides on (replaying it sends it again).',
  },
  NTF_SEND_PERMANENT: {
    decision: 'dead-letter',
    description:
      'The email transport refused this message for good (an invalid address, an invalid field): the notification ends `failed` as a dead letter; replay it once the cause is fixed.',
  },
  NTF_MESSAGE_INVALID: {
    decision: 'dead-letter',
    description:
      'The built message is over a limit the transport documents (a subject over 998 characters, 5 MiB, 16 KB of custom headers, a line over 998): not sent, the notification ends `failed` as a dead letter; the message names the limit. Sending it again cannot help: fix the template for later events.',
  },
  NTF_TRANSPORT_PAUSED: {
    decision: 'wait',
    description:
      'The transport refused a send for a reason of our own configuration (API key, a missing header, the sender or its domain not verified, a quota): it is paused, its notifications wait `paused`, one is tried at a time, and all are released when one is accepted.',
  },
  NTF_RECIPIENT_SUPPRESSED: {
    decision: 'skip',
    description:
      'The address is on the suppression list (a hard bounce, a complaint, a provider refusal, an operator): the notification ends `suppressed` without a send, a retry or a dead letter.',
  },
  NTF_DELIVERY_NOT_LINKED: {
    decision: 'retry',
    description:
      'A delivery event names a message no notification records yet (it may beat the `sent` mark): retried, then recorded without a notification.',
  },
  NTF_RETRIES_EXHAUSTED: {
    decision: 'dead-letter',
    description: 'Cloudflare moved the message to notify-dlq after max_retries (the handler never settled it).',
  },
  NTF_UNKNOWN_QUEUE: {
    decision: 'retry',
    description:
      'A batch arrived from a queue this Worker has no consumer for; retried until Cloudflare dead-letters it.',
  },
  UNAUTHORIZED: { status: 401, description: 'No bearer token, or a token this Worker does not know.' },
  TOKEN_EXPIRED: {
    status: 401,
    description:
      "An end user's inbox token past its `exp`: the client asks its host application for a new one (its socket closes with code 4001 when the token ends).",
  },
  TOO_MANY_ATTEMPTS: {
    status: 429,
    description:
      'Too many unknown tokens or failed sign-ins from this client: every token is refused until `Retry-After` seconds have passed.',
  },
  TOO_MANY_PREVIEWS: {
    status: 429,
    description:
      "A template preview or save while the same operator's last one is still rendering: one at a time, try again after `Retry-After`.",
  },
  FORBIDDEN: { status: 403, description: 'A known token without the scope this route needs.' },
  INVALID_JSON: { status: 400, description: 'The request body is not JSON.' },
  INVALID_REQUEST: { status: 400, description: 'The request does not match its schema; `issues` names each field.' },
  PAYLOAD_TOO_LARGE: { status: 413, description: 'The request body, or one event in it, is larger than allowed.' },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    description: 'The request body is not `application/json` where the route takes JSON.',
  },
  NOT_FOUND: { status: 404, description: 'No such route or resource.' },
  CONFLICT: {
    status: 409,
    description: 'The request conflicts with the current state (e.g. an older contact version).',
  },
  SHARDS_GROWING: {
    status: 503,
    description:
      'The D1 shards are growing (DB_SHARDS_GROWING_TO is set): changes wait until the move is over and the Worker runs with the new count; send it again then (`Retry-After`).',
  },
  QUEUE_UNAVAILABLE: {
    status: 503,
    description: 'The queue did not take the whole batch; send it again (what was already queued is deduplicated).',
  },
  CONFIG_INVALID: {
    status: 500,
    description: 'A Worker variable or secret is missing or malformed; the message names it.',
  },
  INTERNAL: { status: 500, description: 'An unexpected error; details are in the Worker log.' },
} as const satisfies Record<string, { description: string } & ({ decision: Decision } | { status: number })>

/** What the table decides for a pipeline code (src/queue/policy.ts applies it). */
export type Decision = 'retry' | 'dead-letter' | 'skip' | 'wait'

/** Any error code. */
export type ErrorCode = keyof typeof ERRORS

/** Codes that end a queue message. */
export type PipelineCode = { [K in ErrorCode]: (typeof ERRORS)[K] extends { decision: string } ? K : never }[ErrorCode]

/** Codes the HTTP API answers with. */
export type ApiCode = Exclude<ErrorCode, PipelineCode>

/** One problem with a field, as the API and dead letters report it (`index`: the ingest event it is about). */
export type FieldIssue = RefusalIssue

/** An error that knows its pipeline code. Anything else thrown in a consumer counts as `NTF_UNEXPECTED`. */
export class PipelineError extends Error {
  readonly code: PipelineCode
  readonly issues: FieldIssue[]

  constructor(code: PipelineCode, message: string, options?: { cause?: unknown; issues?: FieldIssue[] }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'PipelineError'
    this.code = code
    this.issues = options?.issues ?? []
  }
}

/** An error the HTTP API turns into `{error:{code,message,issues}}` with the code's status. */
export class ApiError extends Error {
  readonly code: ApiCode
  readonly issues: FieldIssue[] | undefined

  /** Seconds the client should wait, sent as `Retry-After` (a 429). */
  readonly retryAfter: number | undefined

  constructor(code: ApiCode, message: string, issues?: FieldIssue[], options: { retryAfter?: number } = {}) {
    super(message)
    this.name = 'ApiError'
    this.code = code
    this.issues = issues
    this.retryAfter = options.retryAfter
  }

  /** HTTP status of this error's code. */
  get status(): number {
    return ERRORS[this.code].status
  }
}

/** The decision of a pipeline code. */
export function decisionOf(code: PipelineCode): Decision {
  return ERRORS[code].decision
}
