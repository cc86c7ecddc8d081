import { BY_EMAIL } from '../notifications/channels.ts'
import { firstUsable, pinned, triedThrough } from '../notifications/route.ts'
import { claimable, heldBy, IN_CLAIM_BATCH, TRY_NOT_COUNTED } from '../notifications/sql.ts'
import { STATUS_AS_FILTER } from '../sql.ts'

/**
 * Failover between the transports of EMAIL_TRANSPORTS, the parts the claim
 * and the marks do (which transport a claimed email goes through is
 * src/notifications/route.ts). An email goes through the next transport only
 * when the one before certainly did not send it:
 *
 * - refused for a reason of our own configuration (a key, a sender, a
 *   quota): that transport pauses, and the email is tried again at once
 *   (`markFailedOver`), where the claim sends it through the next usable one;
 * - never tried, because that transport is paused or its circuit open.
 *
 * One that may have gone out (a lost answer, an internal error of the
 * binding, a lease that ran out mid-send) stays with its transport: tried
 * again through it, under the same key, as soon as it is usable; while it is
 * not and another is, it waits `unknown` for the delivery events of its
 * transport (`failoverGate`), which settle it as sent, and goes through the
 * next one only when none came (src/notifications/marks.ts,
 * `resolveUnknownOutcomes`). A refusal about the message or the recipient
 * fails the email wherever it was sent, as with one transport.
 *
 * A paused transport comes back by a probe, as with one transport, but
 * while mail flows through another there is nothing `paused` to probe with:
 * when its probe is due, the claim names one email of its batch, never tried,
 * as the probe (`takeClaimProbe`), and sends it through the paused one. Its
 * acceptance ends the pause and the rest follow; its refusal sends it to the
 * next transport and pushes the next probe out.
 */

/**
 * Names the probe of each paused transport whose probe is due while another
 * configured transport is usable: the oldest email of this claim batch that
 * is due, not in a bundle, never tried through any provider (nothing of it
 * may have gone out), and no verification decision (those have their own
 * holds). Holds the slot until `holdUntil`, as the cron's probe does. Runs
 * first in the claim's transaction, so the gates and the claim see it.
 * Parameters: the claim batch's JSON (`IN_CLAIM_BATCH`), now, hold until,
 * JSON array of the configured transports.
 */
export function takeClaimProbe(
  db: D1Database,
  claims: string,
  now: string,
  holdUntil: string,
  transports: string,
): D1PreparedStatement {
  const candidate = `FROM notifications n
    WHERE n.id IN (SELECT json_extract(value, '$.id') FROM json_each(?1))
      AND +n.status = 'pending' AND n.scheduled_at <= ?2 AND n.channel = 'email' AND n.batch_id IS NULL
      AND n.maybe_sent_at IS NULL AND n.provider_id IS NULL AND n.decision_person IS NULL
      AND n.cancelled_at IS NULL`
  return db
    .prepare(
      `UPDATE transport_pauses SET probe_at = ?3, updated_at = ?2,
         probe_id = (SELECT n.id ${candidate} ORDER BY n.created_at, n.id LIMIT 1)
       WHERE transport IN (SELECT value FROM json_each(?4)) AND probe_at <= ?2
         AND EXISTS (SELECT 1 FROM json_each(?4) t WHERE t.value <> transport_pauses.transport
                     AND NOT EXISTS (SELECT 1 FROM transport_pauses q WHERE q.transport = t.value))
         AND EXISTS (SELECT 1 ${candidate})
       RETURNING transport, probe_id`,
    )
    .bind(claims, now, holdUntil, transports)
}

/**
 * Takes out of the claim an email that may have gone out through a
 * transport that cannot be used now (paused, or its circuit open), when
 * another one can: it waits `unknown` until `decideAt` for that transport's
 * delivery events under its Message-ID (the claim batch's `messageId`),
 * with `failover_from` naming the transport it will leave if none come. With
 * no other transport usable, the pause gate holds it `paused` instead, for
 * its own transport's return. Its probe is not taken out: that is how the
 * transport is tried. Parameters: the claim batch's JSON (`IN_CLAIM_BATCH`),
 * now, decide at, JSON array of the configured transports.
 */
export function failoverGate(
  db: D1Database,
  claims: string,
  now: string,
  decideAt: string,
  transports: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'unknown', error_code = 'NTF_SEND_UNKNOWN',
         failover_from = ${triedThrough('?4')},
         provider_id = coalesce(provider_id, (SELECT json_extract(c.value, '$.messageId') FROM json_each(?1) c
                                              WHERE json_extract(c.value, '$.id') = notifications.id LIMIT 1)),
         status_reason = 'it may have gone out through ' || ${triedThrough('?4')} || ', which cannot be used now ('
           || (SELECT p.code FROM transport_pauses p WHERE p.transport = ${triedThrough('?4')})
           || '): waiting for its delivery events before the next transport sends it',
         scheduled_at = ?3, updated_at = ?2, lease_until = NULL,
         maybe_sent_at = coalesce(maybe_sent_at, CASE WHEN status = 'sending' THEN claimed_at END)
       WHERE ${IN_CLAIM_BATCH} AND ${claimable('?2', '?2', STATUS_AS_FILTER)} AND ${BY_EMAIL} AND ${pinned('?4')}
         AND EXISTS (SELECT 1 FROM transport_pauses p WHERE p.transport = ${triedThrough('?4')}
                     AND coalesce(p.probe_id <> notifications.id, 1))
         AND ${firstUsable('?4')} IS NOT NULL
       RETURNING id, kind, channel`,
    )
    .bind(claims, now, decideAt, transports)
}

/**
 * A claimed email its transport refused for a reason of our own
 * configuration, when another transport is configured: back to `pending`,
 * due now, its try not counted (nothing was sent), for the claim to send it
 * through the next usable transport (or to hold it `paused` when none is).
 * Only under the claim that tried. Parameters: id, code, reason, now, claim token.
 */
export function markFailedOver(
  db: D1Database,
  id: string,
  code: string,
  reason: string,
  now: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', scheduled_at = ?4, enqueued_at = ?4, updated_at = ?4,
         error_code = ?2, status_reason = ?3, lease_until = NULL, ${TRY_NOT_COUNTED}
       WHERE id = ?1 AND ${heldBy('?5')}`,
    )
    .bind(id, code, reason, now, token)
}
