import { optionalKindNames, throttles } from '../../events/registry.ts'
import { supersedeDecision } from '../../notifications/claim.ts'
import { idempotencyWindowGate, recipientGate, unknownOutcomeGate } from '../../notifications/gates.ts'
import { throttleGate } from '../../notifications/throttle.ts'
import { failoverGate } from '../failover.ts'
import { pauseGate } from '../pause.ts'
import type { DispatchRun } from '../run.ts'
import { idempotencyEdge, KEYED_TRANSPORTS } from '../transports/index.ts'

/** The rows one statement returned, by notification id. */
export type Returned = Map<string, Record<string, unknown>>

/** What the gates did to one notification: ended it (and why), put it off to a time (the throttle), or let it through. */
export type Gated = { ended: Record<string, unknown>; how: string } | { deferredTo: string } | undefined

/**
 * The gates of a batch's claims: statements the claim stage runs in its own
 * transaction, right before the claim, each over every notification of the
 * batch at once (`IN_CLAIM_BATCH`, the claims' JSON) — so a notification a
 * gate ends or puts off is never claimed, whatever the batch's size, at no
 * round trip of their own. In order: supersede a fallback decision, or an
 * authoritative one already sent from its fallback; end it if its recipient
 * opted out or its address is suppressed; end a send of unknown outcome, or
 * one that may have gone out whose retry would come past the provider's
 * idempotency window (each by the rules of the transport it was tried
 * through); hold one that may have gone out through a transport that cannot
 * be used now for that transport's delivery events, when another transport
 * can take it (src/dispatch/failover.ts); hold it `paused` while the
 * transport it would go through is paused (unless it is the probe); put off
 * one whose recipient's throttle is full.
 */
export function gateStage(run: DispatchRun, claims: string): D1PreparedStatement[] {
  const { env, nowIso, config } = run
  const decideAt = new Date(run.now.getTime() + config.UNKNOWN_OUTCOME_SECONDS * 1000).toISOString()
  const transports = JSON.stringify(config.transports)
  const keyed = JSON.stringify(KEYED_TRANSPORTS)
  return [
    supersedeDecision(env.DB, claims, nowIso, config.DECISION_MATCH_SECONDS),
    recipientGate(env.DB, claims, nowIso, optionalKindNames()),
    // Before the pause gate: a send that may have gone out must wait for its outcome, not be held and resent.
    unknownOutcomeGate(env.DB, claims, nowIso, decideAt, transports, keyed),
    idempotencyWindowGate(env.DB, claims, nowIso, idempotencyEdge(config, run.now), decideAt, transports, keyed),
    failoverGate(env.DB, claims, nowIso, decideAt, transports),
    pauseGate(env.DB, claims, nowIso, transports),
    throttleGate(env.DB, claims, nowIso, throttles()),
  ]
}

/** How many statements `gateStage` gives: the claim's results after them are its own. */
export const GATES = 7

/** What the gates did to one notification, from their results (in `gateStage`'s order). */
export function gatedOf(returned: readonly Returned[], id: string): Gated {
  const [superseded, recipient, unknown, pastWindow, failover, paused, deferred] = returned.map((rows) => rows.get(id))
  const ended = superseded ?? recipient ?? paused ?? unknown ?? pastWindow ?? failover
  if (ended) {
    const how = superseded
      ? 'superseded'
      : recipient
        ? String(recipient.status)
        : paused
          ? 'paused'
          : unknown
            ? 'outcome-unknown'
            : pastWindow
              ? 'past-idempotency-window'
              : 'failover-wait'
    return { ended, how }
  }
  if (deferred) return { deferredTo: String(deferred.scheduled_at) }
  return undefined
}
