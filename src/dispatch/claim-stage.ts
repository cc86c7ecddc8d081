import { describeIssues, toFieldIssues } from '../contracts/index.ts'
import { PipelineError } from '../errors.ts'
import { optionalKindNames } from '../events/registry.ts'
import {
  type ClaimedRow,
  claimNotification,
  notificationState,
  supersedeAuthoritative,
  supersedeFallback,
} from '../notifications/claim.ts'
import { optOutGate, suppressionGate, unknownOutcomeGate } from '../notifications/gates.ts'
import { pauseGate } from '../notifications/pause.ts'
import type { Outgoing } from '../queue/send.ts'
import { DispatchMessageSchema, dispatchFor } from './message.ts'
import { messageIdOf } from './mime.ts'
import { readPause, type TransportPause } from './pause.ts'
import type { DispatchRun } from './run.ts'
import { hasIdempotencyKey } from './transports/index.ts'

/** A notification this batch claimed, to send. */
export type ToSend = { message: Message<unknown>; row: ClaimedRow }
/** A notification not due yet, to put back on the queue with its delay. */
export type Later = { message: Message<unknown>; outgoing: Outgoing }

type Claim = { message: Message<unknown>; id: string; due: string | null; statement: number }

/** How soon an authoritative decision held by its fallback in flight asks again. */
const HELD_RETRY_SECONDS = 30

/** Statements per message in the claim batch (see `claimStatements`), after the batch's one read of the pause. */
const PER_MESSAGE = 8

/**
 * Claims every notification of the batch in one D1 batch — per message:
 * supersede a fallback decision, or an authoritative one already sent from its
 * fallback; end it if its recipient opted out or its address is suppressed;
 * hold it `paused` while its transport is paused (unless it is the probe);
 * claim (`pending → sending` under the batch's token and lease); read the
 * state — and sorts out what to send, what is not due yet, and what is done
 * with. The batch's first statement reads the transport's pause, so the
 * sends know whether an accepted one ends it.
 */
export async function claimStage(run: DispatchRun, messages: readonly Message<unknown>[]) {
  const claims: Claim[] = []
  const statements: D1PreparedStatement[] = [readPause(run.env.DB, run.config.EMAIL_TRANSPORT)]
  const optionalKinds = optionalKindNames()
  for (const message of messages) {
    const parsed = DispatchMessageSchema.safeParse(message.body)
    if (!parsed.success) {
      const error = `not a dispatch message: ${describeIssues(toFieldIssues(parsed.error))}`
      run.settle(message, { action: 'dead-letter', code: 'NTF_INVALID_PAYLOAD', error })
      continue
    }
    const { notificationId: id, due = null } = parsed.data
    claims.push({ message, id, due, statement: statements.length })
    statements.push(...claimStatements(run, id, due, optionalKinds))
  }
  if (claims.length === 0) return { toSend: [], later: [] }
  let results: D1Result[]
  try {
    results = await run.env.DB.batch(statements)
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 claim: ${(cause as Error).message}`, { cause })
    for (const claim of claims) run.fail(claim.message, error)
    return { toSend: [], later: [] }
  }
  run.pause = first(results[0]) as TransportPause | undefined
  const toSend: ToSend[] = []
  const later: Later[] = []
  for (const claim of claims) sortClaim(run, claim, results, toSend, later)
  return { toSend, later }
}

/** The `PER_MESSAGE` statements of one notification, in the order `sortClaim` reads their results. */
function claimStatements(
  run: DispatchRun,
  id: string,
  due: string | null,
  optionalKinds: readonly string[],
): D1PreparedStatement[] {
  const { env, nowIso, lease, config } = run
  const decideAt = new Date(run.now.getTime() + config.UNKNOWN_OUTCOME_SECONDS * 1000).toISOString()
  const messageId = messageIdOf({
    notificationId: id,
    from: { address: config.EMAIL_FROM, name: config.EMAIL_FROM_NAME },
  })
  return [
    supersedeFallback(env.DB, id, nowIso, config.DECISION_MATCH_SECONDS),
    supersedeAuthoritative(env.DB, id, nowIso, config.DECISION_MATCH_SECONDS),
    optOutGate(env.DB, id, nowIso, optionalKinds),
    suppressionGate(env.DB, id, nowIso),
    // Before the pause gate: a send that may have gone out must wait for its outcome, not be held and resent.
    unknownOutcomeGate(env.DB, id, nowIso, messageId, decideAt, !hasIdempotencyKey(config.EMAIL_TRANSPORT)),
    pauseGate(env.DB, id, nowIso, config.EMAIL_TRANSPORT),
    claimNotification(env.DB, id, nowIso, lease.until, lease.token, due, config.DECISION_MATCH_SECONDS),
    notificationState(env.DB, id),
  ]
}

/**
 * What one claim came to: ended (superseded, opted out, suppressed), held
 * (paused), to send, stale, not due yet, or done with (missing, final, leased elsewhere).
 */
function sortClaim(run: DispatchRun, claim: Claim, results: D1Result[], toSend: ToSend[], later: Later[]): void {
  const { message, id, due, statement } = claim
  const [fallback, authoritative, optedOut, suppressed, unknown, paused, claimed, state] = Array.from(
    { length: PER_MESSAGE },
    (_, i) => first(results[statement + i]),
  )
  const ended = fallback ?? authoritative ?? optedOut ?? suppressed ?? paused ?? unknown
  if (ended) {
    const how =
      fallback || authoritative
        ? 'superseded'
        : optedOut
          ? 'opted-out'
          : suppressed
            ? 'suppressed'
            : paused
              ? 'paused'
              : 'outcome-unknown'
    run.settle(message, { action: 'ack' })
    run.log.info(`dispatch.${how}`, { notificationId: id, kind: ended.kind })
  } else if (claimed) {
    toSend.push({ message, row: claimed as ClaimedRow })
  } else if (!state) {
    run.settle(message, { action: 'ack' })
    run.log.warn('dispatch.not-found', { notificationId: id })
  } else if (due !== null && state.status === 'pending' && String(state.scheduled_at) !== due) {
    // Rescheduled since this message was sent: the message of the new time is the one that counts.
    run.settle(message, { action: 'ack' })
    run.log.info('dispatch.stale', { notificationId: id })
  } else if (state.status === 'pending' && String(state.scheduled_at) > run.nowIso) {
    // Not due yet (a delay longer than Queues allow, or an early redelivery): come back when it is.
    later.push({ message, outgoing: dispatchFor(id, String(state.scheduled_at), run.now) })
  } else if (state.status === 'pending') {
    // Due, its own time, and still not claimed: an authoritative decision held while its fallback
    // is in flight. It asks again shortly, for the same time; the fallback's outcome decides.
    const { body } = dispatchFor(id, String(state.scheduled_at), run.now)
    later.push({ message, outgoing: { body, delaySeconds: HELD_RETRY_SECONDS } })
    run.log.info('dispatch.held', { notificationId: id })
  } else {
    // Already final, or another delivery holds a live lease (the cron takes over if it dies).
    run.settle(message, { action: 'ack' })
    run.log.info('dispatch.skipped', { notificationId: id, status: state.status })
  }
}

function first(result: D1Result | undefined): Record<string, unknown> | undefined {
  return (result?.results?.[0] as Record<string, unknown> | undefined) ?? undefined
}
