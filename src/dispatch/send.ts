import type { Config } from '../config.ts'
import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import type { ClaimedRow } from '../notifications/claim.ts'
import { markSendFailure, markSent, recordSentMessage } from '../notifications/marks.ts'
import { describeError, type Settlement, settleFailure } from '../queue/policy.ts'
import { suppressAutomatically } from '../suppression/store.ts'
import type { DispatchLease } from './lease.ts'
import type { MarkWriter } from './marks.ts'
import { SendError, type Sent, type Transport } from './transports/index.ts'

/** What sending one claimed notification needs. */
export type SendContext = {
  env: Env
  config: Config
  log: Logger
  lease: DispatchLease
  transport: Transport
  marks: MarkWriter
}

/**
 * Sends one notification this batch claimed and records the result at once,
 * under the batch's claim token: `sent` (with the exact MIME), back to
 * `pending` for a retry, or `failed`. A send is not started when the lease
 * cannot be renewed; a mark that finds the claim taken over changes nothing
 * (logged as `dispatch.lease-lost`).
 */
export async function sendAndRecord(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
): Promise<Settlement> {
  const { config, log, lease, transport } = context
  if (!lease.canStartSend) {
    // Renewals are failing: the lease might run out during the send. The row stays ours until it
    // expires; the retry comes back after that and claims it afresh.
    log.warn('dispatch.lease-at-risk', fieldsOf(row))
    return settleFailure(
      new PipelineError('NTF_DEPENDENCY_FAILED', 'the dispatch lease could not be renewed; not sending under it'),
      message.attempts,
      config.DISPATCH_RETRY_DELAYS_SECONDS,
    )
  }
  let sent: Sent | undefined
  let error: unknown
  try {
    sent = await transport.send({
      notificationId: row.id,
      from: { address: config.EMAIL_FROM, name: config.EMAIL_FROM_NAME },
      to: { address: row.recipient_email as string, name: row.recipient_name },
      subject: row.subject ?? '',
      text: row.text_body ?? '',
      html: row.html_body ?? '',
      unsubscribeUrl: row.unsubscribe_url,
    })
  } catch (caught) {
    error = caught
  }
  return sent ? recordSent(context, message, row, sent) : recordFailure(context, message, row, error)
}

function fieldsOf(row: ClaimedRow) {
  return { notificationId: row.id, eventId: row.event_id, kind: row.kind, source: row.source, traceId: row.trace_id }
}

/** `sent` with the exact MIME, under the claim token; a claim taken over meanwhile records nothing. */
async function recordSent(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  sent: Sent,
): Promise<Settlement> {
  const { env, log, lease, transport } = context
  const at = new Date().toISOString()
  const marked = await record(context.marks, [
    markSent(env.DB, row.id, sent.providerId, at, lease.token),
    recordSentMessage(env.DB, row.id, transport.name, sent.messageId, sent.raw, at, lease.token),
  ])
  if (marked !== 'ok' && marked !== 'fenced') return markFailed(context, message, marked.cause)
  if (marked === 'fenced') log.error('dispatch.lease-lost', { ...fieldsOf(row), transport: transport.name })
  else log.info('notification.sent', { ...fieldsOf(row), transport: transport.name, providerId: sent.providerId })
  return { action: 'ack' }
}

/**
 * Back to `pending` for a retry (not sooner than the provider asked), or
 * `failed` for good (a permanent error, or the last attempt); `suppressed`
 * when the provider refused the address as suppressed.
 */
async function recordFailure(
  context: SendContext,
  message: Message<unknown>,
  row: ClaimedRow,
  error: unknown,
): Promise<Settlement> {
  if (error instanceof SendError && error.outcome === 'suppressed')
    return recordSuppressed(context, message, row, error)
  const { env, config, log, lease } = context
  const permanent = error instanceof SendError && error.permanent
  const code = permanent ? 'NTF_SEND_PERMANENT' : 'NTF_SEND_TRANSIENT'
  const reason = describeError(error)
  const failure = settleFailure(
    new PipelineError(code, reason, { cause: error }),
    message.attempts,
    config.DISPATCH_RETRY_DELAYS_SECONDS,
  )
  const settlement: Settlement = permanent
    ? { action: 'ack' }
    : failure.action === 'dead-letter'
      ? { ...failure, kind: row.kind }
      : failure.action === 'retry'
        ? {
            ...failure,
            delaySeconds: Math.min(43_200, Math.max(failure.delaySeconds, (error as SendError).delaySeconds ?? 0)),
          }
        : failure
  const final = settlement.action !== 'retry'
  const at = new Date().toISOString()
  const marked = await record(context.marks, [
    markSendFailure(env.DB, row.id, final ? 'failed' : 'pending', code, reason, at, lease.token),
  ])
  if (marked !== 'ok' && marked !== 'fenced') return markFailed(context, message, marked.cause)
  const event = final ? 'notification.failed' : 'notification.retry'
  log[final ? 'error' : 'warn'](event, { ...fieldsOf(row), code, error: reason, attempts: message.attempts })
  return settlement
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
): Promise<Settlement> {
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
  return { action: 'ack' }
}

/** Writes a result's marks; `fenced` when the claim was no longer ours (the first statement changed nothing). */
async function record(writer: MarkWriter, marks: D1PreparedStatement[]): Promise<'ok' | 'fenced' | { cause: unknown }> {
  try {
    const [mark] = await writer.write(marks)
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
function markFailed(context: SendContext, message: Message<unknown>, cause: unknown): Settlement {
  context.log.error('dispatch.mark-failed', { error: cause })
  return settleFailure(
    new PipelineError('NTF_DEPENDENCY_FAILED', `D1 mark: ${(cause as Error).message}`, { cause }),
    message.attempts,
    context.config.DISPATCH_RETRY_DELAYS_SECONDS,
  )
}
