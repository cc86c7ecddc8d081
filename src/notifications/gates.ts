import { STATUS_AS_FILTER } from '../sql.ts'
import { BY_EMAIL } from './channels.ts'
import { triedThrough } from './route.ts'
import { claimable, heldBy, IN_CLAIM_BATCH, maybeSentAt, TAKEN_AS_NOT_SENT } from './sql.ts'

/**
 * The recipient's side of a send, checked in the claim's D1 batch right before
 * the claim itself: a notification due to be claimed ends here, without a
 * send, when its recipient opted out of its (optional) kind or its address is
 * suppressed (an address is email's: an in-app item is not held by it). Each
 * is one statement, so a concurrent delivery cannot slip
 * between the check and the claim.
 */

// The claim's own condition (./claim.ts), so a gate ends exactly what the claim would take.
const CLAIMABLE = `${IN_CLAIM_BATCH} AND ${claimable('?2', '?2', STATUS_AS_FILTER)}`
// Not a notification in a batch: it was judged when the batch was made, and its batch is sent
// whole or not at all (./batch.ts), so no recipient gate takes one member out of it.
const UNBATCHED = 'batch_id IS NULL'

// An opt-out of this optional kind by (kind, channel), recorded after the notification was written.
const OPTED_OUT = `kind IN (SELECT value FROM json_each(?3))
  AND EXISTS (SELECT 1 FROM preferences p WHERE p.user_id = notifications.recipient_user_id
              AND p.kind = notifications.kind AND p.channel = notifications.channel AND p.enabled = 0)`

// An entry is kept under the address, or under its pseudonym once the address was erased
// (src/erasure/): the row carries both forms, so each is one primary-key lookup.
const SUPPRESSED_ADDRESS = 's.address IN (lower(notifications.recipient_email), notifications.recipient_hash)'
const SUPPRESSION = `FROM suppressions s WHERE ${SUPPRESSED_ADDRESS} AND (s.until IS NULL OR s.until > ?2)`

// A cancellation came while it was in flight (src/notifications/cancel.ts), and nothing of it can have gone
// out since: its try failed and it is to be tried again. (One that may have gone is sent again, under its
// idempotency key or after its outcome is known: never cancelled and sent.)
const CANCELLED = `cancelled_at IS NOT NULL AND ${maybeSentAt('notifications')} IS NULL`

/**
 * Ends a claimable notification without a send when a cancellation of its
 * key came while it was in flight and nothing of it can have gone out —
 * `cancelled` — or else when its recipient opted out
 * of its (optional) kind — `opted-out` — or else when its address, in clear
 * or as the pseudonym an erasure left on the list, is suppressed and the
 * entry has not ended — `suppressed` (NTF_RECIPIENT_SUPPRESSED). One
 * statement for both, as it runs in every claim; SQLite computes every SET
 * from the row as it was, so the opt-out decides all of them alike. Returns
 * the status it set. Parameters: the claim batch's JSON (`IN_CLAIM_BATCH`),
 * now, JSON array of the optional kinds.
 */
export function recipientGate(
  db: D1Database,
  claims: string,
  now: string,
  optionalKinds: readonly string[],
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET lease_until = NULL, updated_at = ?2,
         status = CASE WHEN ${CANCELLED} THEN 'cancelled' WHEN ${OPTED_OUT} THEN 'opted-out' ELSE 'suppressed' END,
         error_code = CASE WHEN ${CANCELLED} OR ${OPTED_OUT} THEN error_code ELSE 'NTF_RECIPIENT_SUPPRESSED' END,
         status_reason = CASE WHEN ${CANCELLED} THEN 'cancelled while it was in flight; its retry is not sent' || ${TAKEN_AS_NOT_SENT}
           WHEN ${OPTED_OUT} THEN 'the recipient opted out of ' || kind || ' by ' || channel
           ELSE (SELECT 'the address is suppressed (' || s.cause || ', ' || s.source || ')' ${SUPPRESSION} LIMIT 1)
         END
       WHERE ${CLAIMABLE} AND ${UNBATCHED}
         AND ((${CANCELLED}) OR (${OPTED_OUT}) OR (${BY_EMAIL} AND EXISTS (SELECT 1 ${SUPPRESSION})))
       RETURNING id, kind, channel, status`,
    )
    .bind(claims, now, JSON.stringify(optionalKinds))
}

/**
 * Through a transport without an idempotency key, a notification left
 * `sending` by a claim whose lease ended — that delivery crashed, or sent and
 * could not record it — has an unknown outcome: instead of being taken over
 * and sent again, it waits as `unknown` for the provider's delivery events
 * (./marks.ts `markUnknown`). Judged by the transport its claim sent it
 * through (`transport`): through one with a key (`keyed`) a resend is
 * answered, not sent — unless that transport is no longer configured, when
 * the next try would go through another. The Message-ID it keeps is the claim batch's
 * `messageId` for the notification. Parameters: the claim batch's JSON
 * (`IN_CLAIM_BATCH`), now, decide at, JSON array of the configured
 * transports, JSON array of the transports with an idempotency key.
 */
export function unknownOutcomeGate(
  db: D1Database,
  claims: string,
  now: string,
  decideAt: string,
  transports: string,
  keyed: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'unknown', error_code = 'NTF_SEND_UNKNOWN',
         provider_id = (SELECT json_extract(c.value, '$.messageId') FROM json_each(?1) c
                        WHERE json_extract(c.value, '$.id') = notifications.id LIMIT 1),
         status_reason = 'a claim ended without recording its send: whether it went out is not known',
         scheduled_at = ?3, updated_at = ?2, lease_until = NULL, maybe_sent_at = coalesce(maybe_sent_at, claimed_at)
       WHERE ${IN_CLAIM_BATCH} AND ${STATUS_AS_FILTER} = 'sending' AND lease_until < ?2 AND ${BY_EMAIL}
         AND (${triedThrough('?4')} NOT IN (SELECT value FROM json_each(?5))
              OR ${triedThrough('?4')} NOT IN (SELECT value FROM json_each(?4)))
       RETURNING id, kind, channel`,
    )
    .bind(claims, now, decideAt, transports, keyed)
}

/**
 * The end of a key's window, for a transport whose retries the provider
 * answers instead of sending them again only for so long (resend keeps an
 * idempotency key 24 h, RESEND_IDEMPOTENCY_WINDOW_HOURS). The statements
 * below take a notification that may have gone out (`maybe_sent_at`) before
 * `edge` — the window, less a margin, before now — out of the claim: a
 * request under its key could be answered by a provider that forgot it, and
 * sent a second time. It waits `unknown` for the provider's delivery events,
 * as an unknown outcome does; with none by `decideAt` it becomes a dead letter
 * (src/maintenance/cron.ts), never a blind second send.
 */
const PAST_WINDOW = `status = 'unknown', error_code = 'NTF_SEND_UNKNOWN', lease_until = NULL,
  status_reason = 'it may have gone out, and its retry would come after the provider''s idempotency window: '
    || 'not sent again blindly; waiting for the provider''s delivery events'`

/**
 * `PAST_WINDOW` for the notifications of a claim batch tried through a
 * transport with a key (`keyed`; through one without, its lost answers are
 * unknown already). Parameters: the claim batch's JSON (`IN_CLAIM_BATCH`),
 * now, edge, decide at, JSON array of the configured transports, JSON array
 * of the transports with an idempotency key.
 */
export function idempotencyWindowGate(
  db: D1Database,
  claims: string,
  now: string,
  edge: string,
  decideAt: string,
  transports: string,
  keyed: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET ${PAST_WINDOW}, scheduled_at = ?4, updated_at = ?2
       WHERE ${CLAIMABLE} AND ${maybeSentAt('notifications')} <= ?3 AND ${BY_EMAIL}
         AND ${triedThrough('?5')} IN (SELECT value FROM json_each(?6))
       RETURNING id, kind, channel`,
    )
    .bind(claims, now, edge, decideAt, transports, keyed)
}

/**
 * `PAST_WINDOW` for a whole batch (src/notifications/bundles.ts): its members
 * share one key, so when any may have gone out before `edge`, every member
 * not yet final — claimable, or held by this claim — waits.
 * Parameters: batch id, now, edge, decide at, claim token.
 */
export function bundleWindowGate(
  db: D1Database,
  batchId: string,
  now: string,
  edge: string,
  decideAt: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET ${PAST_WINDOW}, scheduled_at = ?4, updated_at = ?2
       WHERE batch_id = ?1 AND (${claimable('?2', '?2')} OR ${heldBy('?5')})
         AND EXISTS (SELECT 1 FROM notifications b WHERE b.batch_id = ?1 AND ${maybeSentAt('b')} <= ?3)
       RETURNING id`,
    )
    .bind(batchId, now, edge, decideAt, token)
}
