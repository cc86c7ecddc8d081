import type { GroupCommit } from '../../d1/group-commit.ts'
import { notificationDeadLetter } from '../../dead-letters/notification.ts'
import { PipelineError } from '../../errors.ts'
import { maskEmails } from '../../log.ts'
import { messageIdOf } from '../../mail/mime.ts'
import type { ClaimedRow } from '../../notifications/claim.ts'
import { type CountedChange, newCountMark } from '../../notifications/counted.ts'
import {
  markPaced,
  markRetry,
  markSendFailure,
  markSent,
  markUnknown,
  recordSentMessage,
} from '../../notifications/marks.ts'
import { dispatchFor } from '../../queue/dispatch-message.ts'
import {
  describeError,
  type Failure,
  type FailureSettlement,
  retryDelay,
  type Settlement,
  settle,
  settleFailure,
} from '../../queue/policy.ts'
import type { Outgoing } from '../../queue/send.ts'
import { suppressAutomatically } from '../../suppression/suppression-store.ts'
import { circuitStatements } from '../circuit.ts'
import { markFailedOver } from '../failover.ts'
import { acceptedThrough, markPaused, pauseTransport } from '../pause.ts'
import { nextTryAt } from '../retry.ts'
import type { Marked, ToSend } from '../run.ts'
import { type Delivered, SendError } from '../transports/index.ts'
import type { SendContext, Tried } from './send.ts'

/** How one send ended for its queue message, and the message of its next try, if any. */
type SendResult = { settlement: Settlement; next?: Outgoing }

/**
 * Records how the send of one notification ended, at once and under the
 * batch's lease token: `sent` (with the exact MIME), `pending` again at its
 * retry time (or at the pace's slot, its try not counted), `paused` with its
 * transport, `unknown`, `failed` (a dead letter) or `suppressed`. A mark that
 * finds the claim taken over changes nothing (logged as `dispatch.lease-lost`).
 */
export async function markOne(context: SendContext, item: ToSend, tried: Tried): Promise<Marked[]> {
  const { message, row } = item
  const result = await resultOf(context, message, row, tried)
  return [{ member: item, ...result }]
}

async function resultOf(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  tried: Tried,
): Promise<SendResult> {
  if ('leaseAtRisk' in tried) return leaseAtRisk(context, message, row)
  if ('pacedTo' in tried) return recordPaced(context, message, row, tried.pacedTo)
  if ('sent' in tried) return recordSent(context, message, row, tried.sent[0] as Delivered)
  const refusal = tried.refused
  if (refusal.outcome === 'suppressed') return recordSuppressed(context, message, row, refusal)
  if (refusal.outcome === 'paused') return recordPaused(context, message, row, refusal)
  if (refusal.outcome === 'unknown') return recordUnknown(context, message, row, refusal)
  return recordFailure(context, message, row, refusal)
}

/**
 * Renewals are failing: the lease might run out during the send, so none
 * starts. The row stays ours until it expires; the retry comes back after
 * that and claims it afresh.
 */
function leaseAtRisk(context: SendContext, message: Message<unknown>, row: ClaimedRow): SendResult {
  context.log.warn('dispatch.lease-at-risk', fieldsOf(row))
  const error = new PipelineError('NTF_DEPENDENCY_FAILED', 'the dispatch lease could not be renewed; not sending')
  return { settlement: settleFailure(error, message.attempts, context.config.DISPATCH_RETRY_DELAYS_SECONDS) }
}

/** The log fields of a claimed notification (no address, no name). */
export function fieldsOf(row: ClaimedRow) {
  return { notificationId: row.id, eventId: row.event_id, kind: row.kind, source: row.source, traceId: row.trace_id }
}

/**
 * `sent` with the exact MIME, under the lease token; a claim taken over
 * meanwhile records nothing. When the transport was paused (this was its
 * probe, or a send the pause did not stop in time), the pause ends and every
 * notification it held is released.
 */
async function recordSent(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  sent: Delivered,
): Promise<SendResult> {
  const { env, config, log, lease, transport, pause } = context
  const at = new Date().toISOString()
  // An in-app item has no message to keep (its content is the row's).
  const kept = sent.raw === '' ? 0 : config.SENT_MESSAGE_RETENTION_DAYS
  const mark = newCountMark()
  const marked = await record(
    context.marks,
    [
      markSent(env.DB, row.id, transport.name, sent.providerId, at, lease.token, mark),
      ...recordSentMessage(env.DB, kept, row.id, transport.name, sent.messageId, sent.raw, at, lease.token),
      ...acceptedThrough(env.DB, transport.name, pause, context.outages, at),
    ],
    [{ id: row.id, mark, status: 'sent' }],
  )
  if (marked !== 'ok' && marked !== 'fenced') return markFailed(context, message, marked.cause)
  if (marked === 'fenced') log.error('dispatch.lease-lost', { ...fieldsOf(row), transport: transport.name })
  else log.info('notification.sent', { ...fieldsOf(row), transport: transport.name, providerId: sent.providerId })
  if (pause && marked === 'ok') {
    log.warn('transport.resumed', { transport: pause.transport, code: pause.code, pausedSince: pause.since })
  }
  return { settlement: { action: 'ack' } }
}

/**
 * A transient failure (NTF_SEND_TRANSIENT, a `retry` code): back to `pending`
 * at its retry time (the policy's delay for the row's attempt, never sooner
 * than the provider asked), with a message for that time; after the last
 * attempt, `failed` and a dead letter. A refusal about this message
 * (`permanent`: a `dead-letter` code) fails at once, as a dead letter too, so
 * an operator sees it and can replay it once it is fixed.
 */
async function recordFailure(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  error: SendError,
): Promise<SendResult> {
  const { env, log, lease } = context
  const code = error.code ?? (error.outcome === 'permanent' ? 'NTF_SEND_PERMANENT' : 'NTF_SEND_TRANSIENT')
  const reason = describeError(error)
  const now = new Date()
  // The row counts the attempts, and keeps a retry's time: its message is acked and one for that time sent.
  const settled = settleOnRow(context, row, { code, error: reason, kind: row.kind })
  const retryAt = settled.action === 'retry' ? nextTryAt(settled.delaySeconds, error.delaySeconds, now) : undefined
  const at = now.toISOString()
  const marks = retryAt
    ? [markRetry(env.DB, row.id, code, reason, retryAt.toISOString(), at, lease.token, uncertainOf(error))]
    : [
        markSendFailure(env.DB, row.id, 'failed', code, reason, at, lease.token),
        await failedDeadLetter(env.DB, row, code, reason, at),
      ]
  const marked = await record(context.marks, [...marks, ...circuitOf(context, row, error, now)])
  if (marked !== 'ok' && marked !== 'fenced') return markFailed(context, message, marked.cause)
  const fields = { ...fieldsOf(row), code, error: reason, attempts: row.send_attempts }
  if (retryAt) {
    log.warn('notification.retry', { ...fields, retryAt: retryAt.toISOString() })
    if (marked === 'fenced') return { settlement: { action: 'ack' } }
    return { settlement: { action: 'ack' }, next: dispatchFor(row.id, retryAt.toISOString(), now) }
  }
  // Its dead letter was written with its status: the message is done with.
  log.error('notification.failed', fields)
  return { settlement: { action: 'ack' } }
}

/**
 * The dead letter of a claimed notification that fails for good, for the D1
 * batch that marks it `failed` (src/dead-letters/notification.ts).
 */
export function failedDeadLetter(
  db: D1Database,
  row: ClaimedRow,
  code: string,
  error: string,
  at: string,
): Promise<D1PreparedStatement> {
  return notificationDeadLetter(db, row, { status: 'failed', code, error, attempts: row.send_attempts, at })
}

/**
 * Whether a failed send may have come after the provider took it: a transient
 * failure the provider did not say sent nothing (no answer, a 5xx). Its retry
 * marks that it may have gone out (`markRetry`).
 */
export function uncertainOf(error: SendError): boolean {
  return error.outcome === 'transient' && !error.nothingSent
}

/**
 * The pace had no slot for it within PACE_MAX_WAIT_MS: the notification goes
 * back to `pending` at the slot's time, with a message for that time, and its
 * try is not counted (`markPaced`) — nothing reached the provider, so waiting
 * for the rate never uses up its retries.
 */
async function recordPaced(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  at: Date,
): Promise<SendResult> {
  const { env, log, lease } = context
  const now = new Date()
  const dueAt = at.toISOString()
  const marked = await record(context.marks, [markPaced(env.DB, row.id, dueAt, now.toISOString(), lease.token)])
  if (marked !== 'ok' && marked !== 'fenced') return markFailed(context, message, marked.cause)
  log.info('notification.paced', { ...fieldsOf(row), dueAt })
  if (marked === 'fenced') return { settlement: { action: 'ack' } }
  return { settlement: { action: 'ack' }, next: dispatchFor(row.id, dueAt, now) }
}

/**
 * The provider may have taken it, and this transport has no idempotency key:
 * the notification waits `unknown` under its Message-ID for the provider's
 * delivery events (which settle it as sent); the cron sends it again only when
 * none came within UNKNOWN_OUTCOME_SECONDS. After the last attempt it fails
 * as a dead letter, like any failure that keeps coming back.
 */
async function recordUnknown(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  error: SendError,
): Promise<SendResult> {
  const { env, config, log, lease } = context
  if (retryDelay(row.send_attempts, config.DISPATCH_RETRY_DELAYS_SECONDS) === undefined) {
    return recordFailure(context, message, row, new SendError(error.message, 'transient', { cause: error }))
  }
  const now = new Date()
  const decideAt = new Date(now.getTime() + config.UNKNOWN_OUTCOME_SECONDS * 1000).toISOString()
  const messageId = messageIdOf({ notificationId: row.id, from: { address: config.EMAIL_FROM, name: '' } })
  const reason = describeError(error)
  const marked = await record(context.marks, [
    markUnknown(env.DB, row.id, messageId, reason, decideAt, now.toISOString(), lease.token),
    ...circuitOf(context, row, error, now),
  ])
  if (marked !== 'ok' && marked !== 'fenced') return markFailed(context, message, marked.cause)
  log.warn('notification.outcome-unknown', { ...fieldsOf(row), code: 'NTF_SEND_UNKNOWN', decideAt })
  return { settlement: settleOnRow(context, row, { code: 'NTF_SEND_UNKNOWN', error: reason }) }
}

/**
 * A refusal about our own configuration: the transport pauses (or counts one
 * more refused probe) and the notification waits `paused` with the reason;
 * its try does not count against its own attempts. Nothing ends `failed`.
 */
async function recordPaused(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  error: SendError,
): Promise<SendResult> {
  const { env, config, log, lease, transport } = context
  const now = new Date()
  const at = now.toISOString()
  // Kept in transport_pauses and shown on every console page: a provider's words may name an address.
  const reason = maskEmails(describeError(error))
  const code = error.providerCode ?? 'unknown'
  const notBefore = error.delaySeconds ? new Date(now.getTime() + error.delaySeconds * 1000) : null
  // With another transport configured, nothing was sent: it goes through the next one at once.
  const failover = config.transports.length > 1
  const marked = await record(context.marks, [
    failover
      ? markFailedOver(env.DB, row.id, 'NTF_TRANSPORT_PAUSED', failedOverReason(transport.name, code), at, lease.token)
      : markPaused(env.DB, row.id, 'NTF_TRANSPORT_PAUSED', reason, at, lease.token),
    pauseTransport(env.DB, transport.name, code, reason, now, notBefore, row.id),
  ])
  if (marked !== 'ok' && marked !== 'fenced') return markFailed(context, message, marked.cause)
  log.error('transport.paused', { ...fieldsOf(row), transport: transport.name, code, error: reason })
  if (failover && marked === 'ok') {
    log.warn('transport.failover', { ...fieldsOf(row), from: transport.name, code })
    return { settlement: { action: 'ack' }, next: dispatchFor(row.id, at, now) }
  }
  return { settlement: settleOnRow(context, row, { code: 'NTF_TRANSPORT_PAUSED', error: reason }) }
}

/** Why an email failed over, for its row (a provider's own words stay with the pause). */
export function failedOverReason(transport: string, code: string): string {
  return `the ${transport} transport refused it (${code}) and is paused: going through the next transport`
}

/**
 * The statements that count a failed try against its transport's circuit
 * (src/dispatch/circuit.ts): none when the failure says nothing of the
 * provider's health, or with one transport.
 */
export function circuitOf(context: SendContext, row: ClaimedRow, error: SendError, now: Date): D1PreparedStatement[] {
  const { env, config, transport } = context
  // An in-app feed has no circuit: it is no email transport.
  if (!(config.transports as readonly string[]).includes(transport.name)) return []
  return circuitStatements(env.DB, transport.name, error, {
    now,
    threshold: config.CIRCUIT_FAILURES,
    transports: config.transports.length,
    notificationId: row.id,
  })
}

/**
 * The provider will not mail this address: the notification ends `suppressed`
 * (NTF_RECIPIENT_SUPPRESSED, no retry, no dead letter) and the address joins
 * the suppression list for SUPPRESSION_PROVIDER_DAYS, so the next notification
 * to it is not even tried.
 */
async function recordSuppressed(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  error: SendError,
): Promise<SendResult> {
  const { env, config, log, lease, transport } = context
  const now = new Date()
  const at = now.toISOString()
  const reason = describeError(error)
  const until = new Date(now.getTime() + config.SUPPRESSION_PROVIDER_DAYS * 86_400_000).toISOString()
  const marked = await record(context.marks, [
    markSendFailure(env.DB, row.id, 'suppressed', 'NTF_RECIPIENT_SUPPRESSED', reason, at, lease.token),
    suppressAutomatically(
      env.DB,
      {
        address: row.recipient_email as string,
        cause: 'provider',
        reason: `${transport.name} refused the address as suppressed`,
        until,
        source: transport.name,
        notificationId: row.id,
        providerEvent: null,
      },
      at,
    ),
  ])
  if (marked !== 'ok' && marked !== 'fenced') return markFailed(context, message, marked.cause)
  log.warn('notification.suppressed', { ...fieldsOf(row), code: 'NTF_RECIPIENT_SUPPRESSED', transport: transport.name })
  return { settlement: settleOnRow(context, row, { code: 'NTF_RECIPIENT_SUPPRESSED', error: reason }) }
}

/**
 * How a send's failure ends its message, as the error table decides
 * (src/queue/policy.ts), its attempts counted on the row: a `skip` or `wait`
 * code is acked (the row holds what became of it), a `dead-letter` code is a
 * dead letter, a `retry` code is retried at the time the row keeps.
 */
export function settleOnRow(context: SendContext, row: ClaimedRow, failure: Failure): FailureSettlement {
  return settle(failure, row.send_attempts, context.config.DISPATCH_RETRY_DELAYS_SECONDS)
}

/** Writes a result's marks, counting `changes` with them; `fenced` when the claim was no longer ours (the first statement changed nothing). */
async function record(
  writer: GroupCommit<CountedChange>,
  marks: D1PreparedStatement[],
  changes: readonly CountedChange[] = [],
): Promise<'ok' | 'fenced' | { cause: unknown }> {
  try {
    const [mark] = await writer.write(marks, changes)
    return (mark?.meta.changes ?? 0) > 0 ? 'ok' : 'fenced'
  } catch (cause) {
    return { cause }
  }
}

/**
 * A result that could not be recorded: the row stays `sending` until its lease
 * ends, and retrying the message re-reads it (a send that did happen is then
 * sent again under the same Message-ID and the provider's idempotency key).
 */
function markFailed(context: SendContext, message: Message<unknown>, cause: unknown): SendResult {
  context.log.error('dispatch.mark-failed', { error: cause })
  const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 mark: ${(cause as Error).message}`, { cause })
  return { settlement: settleFailure(error, message.attempts, context.config.DISPATCH_RETRY_DELAYS_SECONDS) }
}
