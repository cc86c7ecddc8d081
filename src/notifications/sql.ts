import { FINAL_STATUSES } from './status.ts'

/**
 * SQL fragments that more than one state change must agree on. Each is
 * written once, here; a statement that needs one interpolates it.
 */

/**
 * A notification a delivery may take: `pending` and due at `due`, or left
 * `sending` by a delivery whose lease ended before `leaseEnded` (it crashed,
 * or lost its answers). The claim, the recipient gates and the cron's search
 * for lost notifications all use it.
 *
 * @param due - SQL expression of the time a pending notification must be due by
 * @param leaseEnded - SQL expression of the time a sending notification's lease must have ended by
 * @param status - the status column as the statement names it: `STATUS_AS_FILTER` (src/sql.ts) in a statement over a claim batch
 */
export function claimable(due: string, leaseEnded: string, status = 'status'): string {
  return `((${status} = 'pending' AND scheduled_at <= ${due}) OR (${status} = 'sending' AND lease_until < ${leaseEnded}))`
}

/**
 * The notifications a claim batch is about: `?1` is a JSON array of
 * `{id, due, messageId}` (src/dispatch/stages/claim.ts), one per message of the
 * consumer batch, so each claim statement runs once per batch, not once per
 * message. The subquery is not correlated, so SQLite looks each id up by the
 * primary key — as long as the statement names its status `STATUS_AS_FILTER`
 * (src/sql.ts).
 */
export const IN_CLAIM_BATCH = "id IN (SELECT json_extract(value, '$.id') FROM json_each(?1))"

/**
 * A notification still held by the claim that carries `token`: every mark of a
 * send's result and every lease renewal apply only under it, so a delivery
 * whose lease ran out and was taken over can never overwrite the outcome of
 * the one that took over.
 *
 * @param token - SQL expression of the claim token
 */
export function heldBy(token: string): string {
  return `status = 'sending' AND claim_token = ${token}`
}

/**
 * Whether a request carrying the notification `alias` may have reached the
 * provider without our knowing: its answer was lost, or a claim ended without
 * recording its send (`maybe_sent_at`, migration 0018), or its outcome was
 * unknown through a transport without a key and no delivery event settled it
 * (`provider_id` without `sent`). Its next try must be the same request under
 * the same key, and a verification decision waits for it.
 *
 * @param alias - the notifications row as the statement names it
 */
export function mayHaveGoneOut(alias: string): string {
  return `(${alias}.maybe_sent_at IS NOT NULL OR ${alias}.provider_id IS NOT NULL)`
}

/**
 * What a cancellation's reason adds when an earlier try of the notification
 * was taken as not sent (`unconfirmed_through`, the transports of such tries,
 * comma-separated: set when no delivery event came from a transport it left,
 * or from one whose outcome a cancellation found unknown, src/notifications/marks.ts,
 * and by an operator's replay of one that may have gone, ./replay.ts): the
 * email may have gone out through them all the same. A string expression,
 * empty for every other row.
 */
export const TAKEN_AS_NOT_SENT = `CASE WHEN notifications.unconfirmed_through IS NULL THEN ''
  WHEN instr(notifications.unconfirmed_through, ',') = 0
  THEN '; a try through ' || notifications.unconfirmed_through
    || ' may have gone out: no delivery event came from it, so it is taken as not sent'
  ELSE '; tries through ' || replace(notifications.unconfirmed_through, ',', ' and ')
    || ' may have gone out: no delivery event came from them, so they are taken as not sent' END`

/**
 * `unconfirmed_through` with the transport `transport` (an SQL expression;
 * NULL adds nothing) added to its list, once: for the `SET` list of a
 * statement that takes a try through it as not sent.
 */
export function withUnconfirmed(transport: string): string {
  return `CASE WHEN (${transport}) IS NULL THEN unconfirmed_through
    WHEN unconfirmed_through IS NULL THEN (${transport})
    WHEN instr(',' || unconfirmed_through || ',', ',' || (${transport}) || ',') > 0 THEN unconfirmed_through
    ELSE unconfirmed_through || ',' || (${transport}) END`
}

/**
 * A claim that takes over a `sending` notification whose lease ran out: the
 * claim before it may have sent it and lost its answer, from the time it
 * claimed. An assignment for the `SET` list of a claim (SQLite computes it
 * from the row as it was).
 */
export const TAKEN_OVER = `maybe_sent_at = ${maybeSentAt('notifications')}`

/**
 * `maybe_sent_at` of the row `alias` as a claim would leave it: a `sending`
 * row whose claim is being taken over may have gone out from its claim's
 * time (`TAKEN_OVER`). What the gates that run before the claim compare.
 *
 * @param alias - the notifications row as the statement names it
 */
export function maybeSentAt(alias: string): string {
  return `coalesce(${alias}.maybe_sent_at, CASE WHEN ${alias}.status = 'sending' THEN ${alias}.claimed_at END)`
}

/**
 * Takes back the try the claim counted (`claimNotifications` adds one): for a
 * try that never reached the provider — its transport was paused, or the pace
 * had no send slot for it soon enough — so that a notification's attempts,
 * and with them its retry budget, count only what a provider answered or lost.
 * An assignment for the `SET` list of a statement that releases a claim.
 */
export const TRY_NOT_COUNTED = 'send_attempts = max(send_attempts - 1, 0)'

/**
 * `sameDecision` (./decision.ts) in SQL, between `notifications` and the row
 * aliased `other`: the same person and decision, on the same channel (an in-app
 * item and an email of one decision are two deliveries, neither the other's);
 * the same request when both
 * name one, else decided within `windowSeconds` of each other (either time
 * unknown: a match). A test runs both on the same pairs. The difference is
 * rounded to the millisecond: julianday's floating point put two decisions
 * exactly one window apart outside it, where the TypeScript rule matched.
 *
 * @param other - alias of the other notifications row
 * @param windowSeconds - SQL expression of the match window in seconds
 */
export function sameDecisionSql(other: string, windowSeconds: string): string {
  return `${other}.decision_person = notifications.decision_person AND ${other}.channel = notifications.channel
  AND CASE WHEN ${other}.decision_request IS NOT NULL AND notifications.decision_request IS NOT NULL
           THEN ${other}.decision_request = notifications.decision_request
           ELSE ${other}.decision_at IS NULL OR notifications.decision_at IS NULL
             OR round(abs(julianday(${other}.decision_at) - julianday(notifications.decision_at)) * 86400000) <= ${windowSeconds} * 1000
      END`
}

/**
 * `status IN (…)` of the final statuses (./status.ts), as SQL literals: a
 * constant list, so it is written into the statement rather than bound.
 */
export function finalStatusSql(): string {
  return `status IN (${FINAL_STATUSES.map((status) => `'${status}'`).join(', ')})`
}
