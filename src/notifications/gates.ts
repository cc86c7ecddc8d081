import { claimable } from './sql.ts'

/**
 * The recipient's side of a send, checked in the claim's D1 batch right before
 * the claim itself: a notification due to be claimed ends here, without a
 * send, when its recipient opted out of its (optional) kind or its address is
 * suppressed. Each is one statement, so a concurrent delivery cannot slip
 * between the check and the claim.
 */

// The claim's own condition (./claim.ts), so a gate ends exactly what the claim would take.
const CLAIMABLE = `id = ?1 AND ${claimable('?2', '?2')}`
// Not a notification in a batch: it was judged when the batch was made, and its batch is sent
// whole or not at all (./batch.ts), so no recipient gate takes one member out of it.
const UNBATCHED = 'batch_id IS NULL'

/**
 * Ends a claimable notification of an optional kind as `opted-out` when its
 * recipient turned (kind, channel) off after it was written.
 * Parameters: id, now, JSON array of the optional kinds.
 */
export function optOutGate(
  db: D1Database,
  id: string,
  now: string,
  optionalKinds: readonly string[],
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'opted-out', lease_until = NULL, updated_at = ?2,
         status_reason = 'the recipient opted out of ' || kind || ' by ' || channel
       WHERE ${CLAIMABLE} AND ${UNBATCHED} AND kind IN (SELECT value FROM json_each(?3))
         AND EXISTS (SELECT 1 FROM preferences p WHERE p.user_id = notifications.recipient_user_id
                     AND p.kind = notifications.kind AND p.channel = notifications.channel AND p.enabled = 0)
       RETURNING id, kind, channel`,
    )
    .bind(id, now, JSON.stringify(optionalKinds))
}

// An entry is kept under the address, or under its pseudonym once the address was erased
// (src/erasure/): the row carries both forms, so each is one primary-key lookup.
const SUPPRESSED_ADDRESS = 's.address IN (lower(notifications.recipient_email), notifications.recipient_hash)'

/**
 * Ends a claimable notification as `suppressed` (NTF_RECIPIENT_SUPPRESSED)
 * when its address — in clear, or as the pseudonym an erasure left on the
 * list — is suppressed and the entry has not ended.
 * Parameters: id, now.
 */
export function suppressionGate(db: D1Database, id: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'suppressed', error_code = 'NTF_RECIPIENT_SUPPRESSED', lease_until = NULL,
         updated_at = ?2,
         status_reason = (SELECT 'the address is suppressed (' || s.cause || ', ' || s.source || ')'
                          FROM suppressions s WHERE ${SUPPRESSED_ADDRESS} AND (s.until IS NULL OR s.until > ?2)
                          LIMIT 1)
       WHERE ${CLAIMABLE} AND ${UNBATCHED}
         AND EXISTS (SELECT 1 FROM suppressions s WHERE ${SUPPRESSED_ADDRESS} AND (s.until IS NULL OR s.until > ?2))
       RETURNING id, kind, channel`,
    )
    .bind(id, now)
}

/**
 * Through a transport without an idempotency key, a notification left
 * `sending` by a claim whose lease ended — that delivery crashed, or sent and
 * could not record it — has an unknown outcome: instead of being taken over
 * and sent again, it waits as `unknown` for the provider's delivery events
 * (./marks.ts `markUnknown`). `enabled` is 0 for a transport with a key (a
 * resend is answered, not sent). Parameters: id, now, Message-ID, decide at, enabled.
 */
export function unknownOutcomeGate(
  db: D1Database,
  id: string,
  now: string,
  messageId: string,
  decideAt: string,
  enabled: boolean,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'unknown', provider_id = ?3, error_code = 'NTF_SEND_UNKNOWN',
         status_reason = 'a claim ended without recording its send: whether it went out is not known',
         scheduled_at = ?4, updated_at = ?2, lease_until = NULL
       WHERE ?5 = 1 AND id = ?1 AND status = 'sending' AND lease_until < ?2
       RETURNING id, kind, channel`,
    )
    .bind(id, now, messageId, decideAt, enabled ? 1 : 0)
}
