import { describeIssues, toFieldIssues } from '../../contracts/index.ts'
import { PipelineError } from '../../errors.ts'
import { messageIdOf } from '../../mail/mime.ts'
import { type ClaimedRow, claimNotifications, notificationStates } from '../../notifications/claim.ts'
import { countChanges, newCountMark } from '../../notifications/counted.ts'
import { DispatchMessageSchema, dispatchFor } from '../../queue/dispatch-message.ts'
import { takeClaimProbe } from '../failover.ts'
import { readTransports, transportStatesOf } from '../pause.ts'
import type { DispatchRun, Later, ToClose, ToEscalate, ToSend } from '../run.ts'
import { GATES, gatedOf, type gateStage, type Returned } from './gate.ts'

/** One message's claim: the notification it names, and the due time it was sent for. */
export type Claim = { message: Message<unknown>; id: string; due: string | null }

/** How soon one side of a verification decision, held while the other is in flight, asks again. */
const HELD_RETRY_SECONDS = 30

/**
 * The claims of a batch's messages; a message that is not a dispatch message
 * is settled here (NTF_INVALID_PAYLOAD, a dead letter naming the field).
 */
export function claimsOf(run: DispatchRun, messages: readonly Message<unknown>[]): Claim[] {
  const claims: Claim[] = []
  for (const message of messages) {
    const parsed = DispatchMessageSchema.safeParse(message.body)
    if (!parsed.success) {
      const error = `not a dispatch message: ${describeIssues(toFieldIssues(parsed.error))}`
      run.failWith(message, { code: 'NTF_INVALID_PAYLOAD', error })
      continue
    }
    const { notificationId: id, due = null } = parsed.data
    claims.push({ message, id, due })
  }
  return claims
}

/** The claims as the claim's statements take them (`IN_CLAIM_BATCH`): id, due time and Message-ID of each. */
function claimsJson(run: DispatchRun, claims: readonly Claim[]): string {
  const from = { address: run.config.EMAIL_FROM, name: run.config.EMAIL_FROM_NAME }
  return JSON.stringify(
    claims.map(({ id, due }) => ({ id, due, messageId: messageIdOf({ notificationId: id, from }) })),
  )
}

/** What the claim's transaction did to one notification: ended it (a gate), put it off (the throttle), claimed it, or neither. */
type Outcome = { ended?: Record<string, unknown>; how?: string; claimed?: ClaimedRow; deferredTo?: string }

/**
 * Claims every notification of the batch in one D1 transaction, whatever the
 * batch's size: each configured transport's pause and circuit are read (so
 * the sends know whether an accepted one ends it), the gates run (`gates`: the gate stage's statements over these claims), and
 * what they let through is claimed (`pending → sending` under the batch's
 * token and lease) — then sorts out what to send, which digests are due to
 * close, what is not due yet, and what is done with. The state of a
 * notification neither claimed nor ended is read after the transaction, so
 * the usual batch, where every claim wins, pays no read of it.
 */
export async function claimStage(
  run: DispatchRun,
  claims: readonly Claim[],
  gates: typeof gateStage,
): Promise<{ toSend: ToSend[]; toClose: ToClose[]; toEscalate: ToEscalate[]; later: Later[] }> {
  const toSend: ToSend[] = []
  const later: Later[] = []
  const toEscalate: ToEscalate[] = []
  if (claims.length === 0) return { toSend, toClose: [], toEscalate, later }
  let results: D1Result[]
  try {
    results = await run.env.DB.batch(claimStatements(run, claims, gates))
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 claim: ${(cause as Error).message}`, { cause })
    for (const claim of claims) run.fail(claim.message, error)
    return { toSend, toClose: [], toEscalate, later }
  }
  const [probes, transports] = results
  run.transports = transportStatesOf((transports?.results ?? []) as Record<string, unknown>[])
  for (const probe of (probes?.results ?? []) as { transport: string; probe_id: string }[]) {
    run.log.warn('transport.probe', { transport: probe.transport, notificationId: probe.probe_id })
  }
  const returned = results.slice(2).map(byId)
  const unclaimed: Claim[] = []
  // A notification named by two messages of the batch: the first message that could have
  // claimed it owns the outcome; the other is sorted as unclaimed (done with, or held).
  const owned = new Set<string>()
  for (const claim of claims) {
    const outcome = owned.has(claim.id) ? {} : outcomeOf(returned, claim)
    if (outcome.ended) {
      owned.add(claim.id)
      run.ack(claim.message)
      run.log.info(`dispatch.${outcome.how}`, { notificationId: claim.id, kind: outcome.ended.kind })
    } else if (outcome.deferredTo) {
      // Its recipient's throttle is full until then: it goes when a place frees.
      owned.add(claim.id)
      later.push({ message: claim.message, outgoing: dispatchFor(claim.id, outcome.deferredTo, run.now) })
      run.log.info('dispatch.throttled', { notificationId: claim.id, dueAt: outcome.deferredTo })
    } else if (outcome.claimed) {
      owned.add(claim.id)
      toSend.push({ message: claim.message, row: outcome.claimed })
    } else {
      unclaimed.push(claim)
    }
  }
  const toClose = unclaimed.length > 0 ? await sortUnclaimed(run, unclaimed, later, toEscalate) : []
  return { toSend, toClose, toEscalate, later }
}

/** The rows a statement returned, by notification id. */
function byId(result: D1Result): Returned {
  const rows = (result.results ?? []) as Record<string, unknown>[]
  return new Map(rows.map((row) => [String(row.id), row]))
}

/**
 * What the claim's transaction (in `claimStatements`' order, after the pause)
 * did to one message's notification. A claimed row goes to a message that
 * named no `due`, or the row's own: a stale message of the same notification
 * in the batch gets nothing, as it claimed nothing.
 */
function outcomeOf(returned: readonly Returned[], claim: Claim): Outcome {
  const gated = gatedOf(returned.slice(0, GATES), claim.id)
  if (gated) return gated
  const [claimedOthers, claimedAuthoritative] = returned.slice(GATES).map((rows) => rows.get(claim.id))
  const claimed = (claimedOthers ?? claimedAuthoritative) as ClaimedRow | undefined
  if (!claimed || (claim.due !== null && claim.due !== claimed.scheduled_at)) return {}
  return { claimed }
}

/**
 * Notifications the claim neither took nor ended: their state, read in one
 * more statement (a round trip only a batch with such a notification pays),
 * says why — missing, stale, not due yet, held, final or leased elsewhere —
 * or that it is a digest due to close, which the caller closes, or an email
 * whose wait for its in-app item has ended (`toEscalate`), which the caller decides.
 */
async function sortUnclaimed(
  run: DispatchRun,
  unclaimed: readonly Claim[],
  later: Later[],
  toEscalate: ToEscalate[],
): Promise<ToClose[]> {
  let states: Map<string, Record<string, unknown>>
  try {
    const { results } = await notificationStates(
      run.env.DB,
      unclaimed.map((claim) => claim.id),
    ).all<Record<string, unknown>>()
    states = new Map(results.map((row) => [String(row.id), row]))
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 claim state: ${(cause as Error).message}`, { cause })
    for (const claim of unclaimed) run.fail(claim.message, error)
    return []
  }
  const toClose: ToClose[] = []
  for (const claim of unclaimed) sortClaim(run, claim, states.get(claim.id), later, toClose, toEscalate)
  return toClose
}

/**
 * The claim's transaction: the probe of a paused transport whose probe is due
 * while mail goes through another (src/dispatch/failover.ts), the
 * transports' pauses and circuits, the gates, then the claim
 * of the others and of authoritative decisions, each over the whole batch
 * (`IN_CLAIM_BATCH`), in the order `outcomeOf` reads their results, and the
 * count of what they claimed.
 */
function claimStatements(run: DispatchRun, claims: readonly Claim[], gates: typeof gateStage): D1PreparedStatement[] {
  const { env, nowIso, lease, config } = run
  const batch = claimsJson(run, claims)
  const window = config.DECISION_MATCH_SECONDS
  const mark = newCountMark()
  const transports = JSON.stringify(config.transports)
  // A probe's slot is held for two leases, as the cron's: one that never reports back is replaced.
  const holdUntil = new Date(run.now.getTime() + 2 * config.DISPATCH_LEASE_SECONDS * 1000).toISOString()
  return [
    takeClaimProbe(env.DB, batch, nowIso, holdUntil, transports),
    readTransports(env.DB, transports),
    ...gates(run, batch),
    claimNotifications(env.DB, batch, nowIso, lease.until, lease.token, window, false, mark, transports),
    claimNotifications(env.DB, batch, nowIso, lease.until, lease.token, window, true, mark, transports),
    // Last: what the two claims took, counted `sending` (nothing `outcomeOf` reads).
    ...countChanges(
      env.DB,
      claims.map(({ id }) => ({ id, mark, status: 'sending' })),
    ),
  ]
}

/**
 * What a claim that neither took nor ended its notification came to, by the
 * notification's state: missing, stale, not due yet, held, a digest to close,
 * or done with (final, or leased elsewhere).
 */
function sortClaim(
  run: DispatchRun,
  claim: Claim,
  state: Record<string, unknown> | undefined,
  later: Later[],
  toClose: ToClose[],
  toEscalate: ToEscalate[],
): void {
  const { message, id, due } = claim
  // A pending notification waits for its send; a collecting digest for its close; an escalating email for its item.
  const waiting = state?.status === 'pending' || state?.status === 'collecting' || state?.status === 'escalating'
  if (!state) {
    run.ack(message)
    run.log.warn('dispatch.not-found', { notificationId: id })
  } else if (due !== null && waiting && String(state.scheduled_at) !== due) {
    // Rescheduled since this message was sent: the message of the new time is the one that counts.
    run.ack(message)
    run.log.info('dispatch.stale', { notificationId: id })
  } else if (waiting && String(state.scheduled_at) > run.nowIso) {
    // Not due yet (a delay longer than Queues allow, or an early redelivery): come back when it is.
    later.push({ message, outgoing: dispatchFor(id, String(state.scheduled_at), run.now) })
  } else if (state.status === 'escalating') {
    // An email whose wait for its in-app item has ended: the item's feed decides whether it goes.
    toEscalate.push({ message, id })
  } else if (state.status === 'collecting' || state.status === 'closing') {
    // A digest at its close, or one whose close died half way (or runs now: the same content, one write lands).
    toClose.push({ message, id })
  } else if (state.status === 'pending') {
    // Due, its own time, and still not claimed: one side of a verification decision held while
    // the other is in flight (claimNotifications). It asks again shortly, for the same time;
    // the other side's outcome decides.
    const { body } = dispatchFor(id, String(state.scheduled_at), run.now)
    later.push({ message, outgoing: { body, delaySeconds: HELD_RETRY_SECONDS } })
    run.log.info('dispatch.held', { notificationId: id })
  } else {
    // Already final, or another delivery holds a live lease (the cron takes over if it dies).
    run.ack(message)
    run.log.info('dispatch.skipped', { notificationId: id, status: state.status })
  }
}
