import { type PipelineCode, PipelineError } from '../../errors.ts'
import { maskEmails } from '../../log.ts'
import { leaveBundle } from '../../notifications/bundles.ts'
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
import { describeError, settleFailure } from '../../queue/policy.ts'
import { markFailedOver } from '../failover.ts'
import { acceptedThrough, markPaused, pauseTransport } from '../pause.ts'
import { nextTryAt } from '../retry.ts'
import type { Bundle, Marked } from '../run.ts'
import { type Delivered, type SendError, sendErrorOf } from '../transports/index.ts'
import { circuitOf, failedDeadLetter, failedOverReason, fieldsOf, settleOnRow, uncertainOf } from './mark-one.ts'
import type { SendContext, Tried } from './send.ts'

/**
 * Records how the send of a bundle ended, each member's result under the
 * batch's lease token. Accepted: every member `sent` with its own
 * provider id. Refused as a whole (a 4xx: nothing sent by this request), a
 * bundle no earlier request of which may have gone out leaves its key: the
 * members are paused, tried again later (a rate limit), or — the bundle was
 * invalid — tried again alone. A bundle an earlier request of which may have
 * gone out keeps its key whatever this one is told (its members leaving it
 * would send them again under keys the provider never saw): it is paused,
 * retried, or — refused as invalid now — waits for the provider's delivery
 * events like any unknown outcome. A 409 `invalid_idempotent_request` says
 * the provider took a request under this key: its emails went out. Any other
 * failure may have come after the emails were taken: the bundle stays as it
 * is, every member waits for the same retry time, and the retry sends the
 * same request under the same key.
 */
export async function markBundle(context: SendContext, bundle: Bundle, tried: Tried): Promise<Marked[]> {
  if ('leaseAtRisk' in tried) return leaseAtRisk(context, bundle)
  if ('pacedTo' in tried) return recordPaced(context, bundle, tried.pacedTo)
  if ('sent' in tried) {
    try {
      return await recordSent(context, bundle, tried.sent)
    } catch (caught) {
      // An answer that cannot be recorded as it stands (fewer ids than emails) is a failure of the
      // request: the bundle keeps its key and is tried again, and the provider answers a repeat.
      return recordRefused(context, bundle, sendErrorOf(caught))
    }
  }
  return recordRefused(context, bundle, tried.refused)
}

/**
 * Renewals are failing: no request starts. Members without a message of their
 * own here stay held until the lease ends; the cron takes them up then.
 */
function leaseAtRisk(context: SendContext, bundle: Bundle): Marked[] {
  context.log.warn('dispatch.lease-at-risk', { batchId: bundle.id, members: bundle.members.length })
  const error = new PipelineError('NTF_DEPENDENCY_FAILED', 'the dispatch lease could not be renewed; not sending')
  const delays = context.config.DISPATCH_RETRY_DELAYS_SECONDS
  return bundle.members.map((member) => ({
    member,
    settlement: settleFailure(error, member.message?.attempts ?? 1, delays),
  }))
}

/**
 * The pace had no slot for the bundle soon enough: every member goes back to
 * `pending` at the slot's time, its try not counted, and stays in its bundle.
 */
async function recordPaced(context: SendContext, bundle: Bundle, at: Date): Promise<Marked[]> {
  const { env, log, lease } = context
  const now = new Date()
  const dueAt = at.toISOString()
  const written = await write(
    context,
    bundle.members.map((member) => markPaced(env.DB, member.row.id, dueAt, now.toISOString(), lease.token)),
  )
  if (!Array.isArray(written)) return failedWrite(context, bundle, written.cause)
  log.info('notification.paced', { batchId: bundle.id, members: bundle.members.length, dueAt })
  return bundle.members.map((member, index) =>
    (written[index]?.meta.changes ?? 0) === 0
      ? { member, settlement: { action: 'ack' } }
      : { member, settlement: { action: 'ack' }, next: dispatchFor(member.row.id, dueAt, now) },
  )
}

async function recordSent(context: SendContext, bundle: Bundle, sent: Delivered[]): Promise<Marked[]> {
  const { env, config, log, lease, transport, pause } = context
  const at = new Date().toISOString()
  const kept = config.SENT_MESSAGE_RETENTION_DAYS
  const mark = newCountMark()
  const perMember = bundle.members.map((member, index) => {
    const one = sent[index] as Delivered
    return [
      markSent(env.DB, member.row.id, transport.name, one.providerId, at, lease.token, mark),
      ...recordSentMessage(env.DB, kept, member.row.id, transport.name, one.messageId, one.raw, at, lease.token),
    ]
  })
  // Each member's mark is the first of its statements: where it is in the batch.
  const markAt = perMember.map((_, index) => perMember.slice(0, index).reduce((sum, group) => sum + group.length, 0))
  const statements = perMember.flat()
  statements.push(...acceptedThrough(env.DB, transport.name, pause, context.outages, at))
  const written = await write(context, statements, sentChanges(bundle, mark))
  if (!Array.isArray(written)) return failedWrite(context, bundle, written.cause)
  if (pause) log.warn('transport.resumed', { transport: pause.transport, code: pause.code, pausedSince: pause.since })
  return bundle.members.map((member, index) => {
    const providerId = sent[index]?.providerId
    if ((written[markAt[index] as number]?.meta.changes ?? 0) === 0) {
      log.error('dispatch.lease-lost', { ...fieldsOf(member.row), transport: transport.name, batchId: bundle.id })
    } else {
      log.info('notification.sent', {
        ...fieldsOf(member.row),
        transport: transport.name,
        providerId,
        batchId: bundle.id,
      })
    }
    return { member, settlement: { action: 'ack' } }
  })
}

async function recordRefused(context: SendContext, bundle: Bundle, error: SendError): Promise<Marked[]> {
  if (error.providerCode === 'invalid_idempotent_request') return recordTaken(context, bundle, error)
  const { env, config, log, lease, transport, pause } = context
  const now = new Date()
  const at = now.toISOString()
  const reason = describeError(error)
  // With another transport configured, a refusal about our configuration sends the members through it.
  const failover = error.outcome === 'paused' && config.transports.length > 1
  const maybeSent = bundle.members.some((member) => member.row.maybe_sent_at !== null)
  // Nothing went out under the bundle's key, by this request or any before: its members are free to go out otherwise.
  const leave = error.nothingSent && !maybeSent
  const invalid = error.nothingSent && error.outcome === 'permanent'
  if (invalid && !leave) return recordUnknownBatch(context, bundle, error)
  const statements: D1PreparedStatement[] = leave ? [leaveBundle(env.DB, bundle.id, lease.token, invalid)] : []
  const letters: Promise<D1PreparedStatement>[] = []
  const plans = bundle.members.map((member) => {
    const { row } = member
    if (failover) {
      const why = failedOverReason(transport.name, error.providerCode ?? 'unknown')
      statements.push(markFailedOver(env.DB, row.id, 'NTF_TRANSPORT_PAUSED', why, at, lease.token))
      return { member, failedOver: true as const }
    }
    if (error.outcome === 'paused') {
      statements.push(markPaused(env.DB, row.id, 'NTF_TRANSPORT_PAUSED', maskEmails(reason), at, lease.token))
      return { member, paused: true as const }
    }
    // Refused as invalid with nothing sent: tried again alone (a `retry` code).
    const code: PipelineCode = invalid
      ? 'NTF_BATCH_REFUSED'
      : (error.code ?? (error.outcome === 'permanent' ? 'NTF_SEND_PERMANENT' : 'NTF_SEND_TRANSIENT'))
    const settled = settleOnRow(context, row, { code, error: reason, kind: row.kind })
    const retryAt = settled.action === 'retry' ? nextTryAt(settled.delaySeconds, error.delaySeconds, now) : undefined
    if (retryAt) {
      statements.push(
        markRetry(env.DB, row.id, code, reason, retryAt.toISOString(), at, lease.token, uncertainOf(error)),
      )
    } else {
      statements.push(markSendFailure(env.DB, row.id, 'failed', code, reason, at, lease.token))
      letters.push(failedDeadLetter(env.DB, row, code, reason, at))
    }
    return { member, code, retryAt }
  })
  if (error.outcome === 'paused') {
    const notBefore = error.delaySeconds ? new Date(now.getTime() + error.delaySeconds * 1000) : null
    const code = error.providerCode ?? 'unknown'
    // The refused request was the pause's probe when the probe is one of its members.
    const probe = bundle.members.find((member) => member.row.id === pause?.probe_id) ?? bundle.members[0]
    statements.push(
      pauseTransport(env.DB, transport.name, code, maskEmails(reason), now, notBefore, probe?.row.id ?? ''),
    )
    log.error('transport.paused', {
      transport: transport.name,
      code,
      error: maskEmails(reason),
      batchId: bundle.id,
    })
  }
  // The circuit counts the request once, for its first member.
  const first = bundle.members[0]
  if (first) statements.push(...circuitOf(context, first.row, error, now))
  // Each dead letter after the marks: it is written only if its mark applied (src/dead-letters/notification.ts).
  const written = await write(context, [...statements, ...(await Promise.all(letters))])
  if (!Array.isArray(written)) return failedWrite(context, bundle, written.cause)
  const offset = leave ? 1 : 0
  return plans.map((plan, index): Marked => {
    const fenced = (written[offset + index]?.meta.changes ?? 0) === 0
    const fields = { ...fieldsOf(plan.member.row), batchId: bundle.id, attempts: plan.member.row.send_attempts }
    if (fenced) return { member: plan.member, settlement: { action: 'ack' } }
    if ('failedOver' in plan) {
      log.warn('transport.failover', { ...fields, from: transport.name, code: error.providerCode ?? 'unknown' })
      return { member: plan.member, settlement: { action: 'ack' }, next: dispatchFor(plan.member.row.id, at, now) }
    }
    if ('paused' in plan) {
      const paused = { code: 'NTF_TRANSPORT_PAUSED', error: maskEmails(reason) } as const
      return { member: plan.member, settlement: settleOnRow(context, plan.member.row, paused) }
    }
    if (plan.retryAt) {
      log.warn('notification.retry', { ...fields, code: plan.code, error: reason, retryAt: plan.retryAt.toISOString() })
      return {
        member: plan.member,
        settlement: { action: 'ack' },
        next: dispatchFor(plan.member.row.id, plan.retryAt.toISOString(), now),
      }
    }
    // Its dead letter was written with its status.
    log.error('notification.failed', { ...fields, code: plan.code, error: reason })
    return { member: plan.member, settlement: { action: 'ack' } }
  })
}

/**
 * The provider answered 409 `invalid_idempotent_request`: it took a request
 * under this bundle's key with another payload — an earlier try of this bundle,
 * whose answer was lost, holding these members and those that went their own
 * way since. Every member went out with it: each is `sent`, without the
 * provider's id of it (its delivery events find it by the notification they
 * name, src/delivery/).
 */
async function recordTaken(context: SendContext, bundle: Bundle, error: SendError): Promise<Marked[]> {
  const { env, log, lease, transport } = context
  const at = new Date().toISOString()
  const reason = `the provider had taken an earlier request of batch ${bundle.id}: sent with it`
  const mark = newCountMark()
  const written = await write(
    context,
    bundle.members.map((member) =>
      markSent(env.DB, member.row.id, transport.name, null, at, lease.token, mark, reason),
    ),
    sentChanges(bundle, mark),
  )
  if (!Array.isArray(written)) return failedWrite(context, bundle, written.cause)
  log.warn('dispatch.batch-taken', {
    batchId: bundle.id,
    members: bundle.members.length,
    error: describeError(error),
  })
  return bundle.members.map((member, index) => {
    if ((written[index]?.meta.changes ?? 0) > 0) {
      log.info('notification.sent', { ...fieldsOf(member.row), transport: transport.name, batchId: bundle.id })
    }
    return { member, settlement: { action: 'ack' } }
  })
}

/**
 * A bundle an earlier request of which may have gone out, refused now as
 * invalid: whether its emails went out is not known, and no request under
 * another key may be made. Its members wait `unknown` for the provider's
 * delivery events (which settle each as sent), and, with none, become dead
 * letters for an operator (src/maintenance/cron.ts).
 */
async function recordUnknownBatch(context: SendContext, bundle: Bundle, error: SendError): Promise<Marked[]> {
  const { env, config, log, lease } = context
  const now = new Date()
  const decideAt = new Date(now.getTime() + config.UNKNOWN_OUTCOME_SECONDS * 1000).toISOString()
  const reason = `${describeError(error)} — refused on a retry of a batch whose first request may have gone out`
  const written = await write(
    context,
    bundle.members.map((member) =>
      markUnknown(env.DB, member.row.id, null, reason, decideAt, now.toISOString(), lease.token),
    ),
  )
  if (!Array.isArray(written)) return failedWrite(context, bundle, written.cause)
  log.warn('notification.outcome-unknown', { batchId: bundle.id, code: 'NTF_SEND_UNKNOWN', decideAt })
  return bundle.members.map((member) => ({ member, settlement: { action: 'ack' } }))
}

/** Every member of the bundle, counted `sent` when its mark under `mark` applied. */
function sentChanges(bundle: Bundle, mark: number): CountedChange[] {
  return bundle.members.map((member) => ({ id: member.row.id, mark, status: 'sent' }))
}

/**
 * Writes a bundle's marks (one transaction with whatever shares their group),
 * counting `changes` with them, or says why it could not.
 */
async function write(
  context: SendContext,
  statements: D1PreparedStatement[],
  changes: readonly CountedChange[] = [],
): Promise<D1Result[] | { cause: unknown }> {
  try {
    return await context.marks.write(statements, changes)
  } catch (cause) {
    return { cause }
  }
}

/**
 * The bundle's result could not be recorded: every member stays `sending`
 * until the lease ends; the retry of a message (or the cron) claims the bundle
 * again and sends the same request, which the provider answers with its
 * first answer if it took it.
 */
function failedWrite(context: SendContext, bundle: Bundle, cause: unknown): Marked[] {
  context.log.error('dispatch.mark-failed', { error: cause, batchId: bundle.id })
  const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 mark: ${(cause as Error).message}`, { cause })
  return bundle.members.map((member) => ({
    member,
    settlement: settleFailure(error, member.message?.attempts ?? 1, context.config.DISPATCH_RETRY_DELAYS_SECONDS),
  }))
}
