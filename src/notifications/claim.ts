import { STATUS_AS_FILTER } from '../sql.ts'
import { routeOf } from './route.ts'
import { claimable, IN_CLAIM_BATCH, mayHaveGoneOut, sameDecisionSql, TAKEN_OVER } from './sql.ts'

/** A notification as the dispatcher reads it after its claim. */
export type ClaimedRow = {
  id: string
  kind: string
  channel: string
  status: string
  event_id: string
  source: string
  /** Whose it is: an in-app item goes to this user's feed. */
  recipient_user_id: string
  /** When it was made: a feed erased since refuses its item. */
  created_at: string
  recipient_email: string | null
  recipient_name: string | null
  subject: string | null
  text_body: string | null
  html_body: string | null
  scheduled_at: string
  lease_until: string | null
  send_attempts: number
  trace_id: string | null
  unsubscribe_url: string | null
  /** The batch it is sent with (src/notifications/bundles.ts), or null when it is sent alone. */
  batch_id: string | null
  batch_position: number | null
  /** 1 when it must not join a batch (one it was in was refused as invalid). */
  send_alone: number
  /** When a request carrying it may have reached the provider without our knowing (`mayHaveGoneOut`), or null. */
  maybe_sent_at: string | null
  /** The person of a verification decision it announces, or null: such a one is sent alone (its claim's holds). */
  decision_person: string | null
  /** The transport its claim sends it through (./route.ts); for an in-app item, the transport that delivered it, if any. */
  transport: string | null
}

/** The columns of a `ClaimedRow`, as every statement that hands a claimed notification to a send returns them. */
export const CLAIMED_COLUMNS = `id, kind, channel, status, event_id, source, recipient_user_id, created_at, recipient_email, recipient_name, subject,
  text_body, html_body, scheduled_at, lease_until, send_attempts, trace_id, unsubscribe_url, batch_id, batch_position,
  send_alone, maybe_sent_at, decision_person, transport`

// A row is a fallback (is_fallback = 1) or not, so at most one of the two ends it.
const FALLBACK_SUPERSEDED = `is_fallback = 1
  AND EXISTS (SELECT 1 FROM notifications a WHERE a.is_fallback = 0
              AND (NOT ${mayHaveGoneOut('notifications')} OR a.status = 'sent') AND ${sameDecisionSql('a', '?3')})`
const AUTHORITATIVE_SUPERSEDED = `is_fallback = 0 AND decision_person IS NOT NULL
  AND EXISTS (SELECT 1 FROM notifications f WHERE f.is_fallback = 1 AND f.status = 'sent'
              AND ${sameDecisionSql('f', '?3')})`

/**
 * Ends a pending verification decision that the other source's notification
 * settles, so the owner gets one email per decision — one statement for both
 * directions (a row is one or the other), as they run in every claim:
 *
 * - a fallback (from person-upserted) whose authoritative notification
 *   exists is superseded — unless it may have gone out already
 *   (`mayHaveGoneOut`: its answer was lost, or its outcome was unknown and no
 *   event settled it), in which
 *   case it is sent again under its Message-ID and supersedes the
 *   authoritative one; but once the authoritative one was sent, even such a
 *   fallback is superseded: sending it again could only make a second email
 *   (and while the authoritative one is in flight, the claim holds it);
 * - an authoritative decision whose fallback was sent is superseded by that
 *   fallback. A fallback still in flight (`sending`, `unknown`) supersedes
 *   nothing: if it then fails, the authoritative decision (with its reason)
 *   is what reaches the owner; until it is settled, the claim holds the
 *   authoritative one (see `claimNotifications`).
 *
 * Parameters: the claim batch's JSON (`IN_CLAIM_BATCH`), now, match window in seconds.
 */
export function supersedeDecision(
  db: D1Database,
  claims: string,
  now: string,
  windowSeconds: number,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'superseded', updated_at = ?2,
         status_reason = CASE WHEN is_fallback = 1
           THEN 'the decision was notified from verification-requests (authoritative)'
           ELSE 'the same decision was already sent from person-upserted' END
       WHERE ${IN_CLAIM_BATCH} AND ${STATUS_AS_FILTER} = 'pending' AND batch_id IS NULL
         AND ((${FALLBACK_SUPERSEDED}) OR (${AUTHORITATIVE_SUPERSEDED}))
       RETURNING id, kind, channel`,
    )
    .bind(claims, now, windowSeconds)
}

// A message that names a `due` claims only the row still due then; one without claims any. Two lists
// SQLite builds once per statement, each looked up per row: a subquery correlated with the row would
// read the whole batch's list again for every row (5,650 rows read for a claim of 100, not 300).
const NAMED_DUE = `((id, scheduled_at) IN (SELECT json_extract(value, '$.id'), json_extract(value, '$.due') FROM json_each(?1))
  OR id IN (SELECT json_extract(value, '$.id') FROM json_each(?1) WHERE json_extract(value, '$.due') IS NULL))`

// An authoritative decision notification: one that a fallback from person-upserted may also announce.
const AUTHORITATIVE_DECISION = 'is_fallback = 0 AND decision_person IS NOT NULL'

/**
 * Claims the due notifications of a claim batch for sending under `token`:
 * `pending → sending` with a lease, or takes over a `sending` one whose lease
 * ran out. One statement for the batch, so exactly one of several concurrent
 * deliveries wins each notification. A message that names a `due` other than
 * the row's is stale and claims nothing.
 *
 * An authoritative decision whose fallback is in flight is not claimed until
 * that fallback is settled — nor while its fallback may have gone out and
 * waits to be sent again (pending or paused, `mayHaveGoneOut`: that send, the
 * same request under the same key, settles it) — nor a fallback that may have gone out while its
 * authoritative decision is in flight: never two emails for one decision,
 * and none lost. So the claim is two statements, run in this order in the claim's D1 batch:
 * everything else first (`authoritative` false), then the authoritative
 * decisions (`authoritative` true), which see a fallback the first one took
 * in the same batch as in flight. (One statement would judge every row
 * against the table as it was before it, and take both.)
 *
 * A row whose status changes carries `mark`, and the caller counts it in the
 * same transaction (./counted.ts); one taken over from a lapsed lease stays
 * `sending` and is not counted again, as the trigger would not.
 *
 * An email's claim also decides the transport it goes through (`routeOf`),
 * in the same statement as the gates before it read the transports' pauses.
 *
 * Parameters: the claim batch's JSON (`IN_CLAIM_BATCH`), now, lease until,
 * claim token, match window in seconds, count mark, JSON array of the
 * configured transports.
 */
export function claimNotifications(
  db: D1Database,
  claims: string,
  now: string,
  leaseUntil: string,
  token: string,
  windowSeconds: number,
  authoritative: boolean,
  mark: number,
  transports: string,
): D1PreparedStatement {
  const which = authoritative
    ? `${AUTHORITATIVE_DECISION}
         AND NOT EXISTS (SELECT 1 FROM notifications f WHERE f.is_fallback = 1
                         AND (f.status IN ('sending', 'unknown')
                              OR (f.status IN ('pending', 'paused') AND ${mayHaveGoneOut('f')}))
                         AND ${sameDecisionSql('f', '?5')})`
    : `NOT (${AUTHORITATIVE_DECISION})
         AND NOT (is_fallback = 1 AND ${mayHaveGoneOut('notifications')}
                  AND EXISTS (SELECT 1 FROM notifications a WHERE a.is_fallback = 0
                              AND a.status IN ('sending', 'unknown') AND ${sameDecisionSql('a', '?5')}))`
  return db
    .prepare(
      `UPDATE notifications SET status = 'sending', lease_until = ?3, claim_token = ?4,
         send_attempts = send_attempts + 1, updated_at = ?2, claimed_at = ?2, ${TAKEN_OVER},
         count_mark = CASE WHEN status <> 'sending' THEN ?6 ELSE count_mark END,
         transport = CASE WHEN channel = 'email' THEN ${routeOf('?7')} ELSE transport END, failover_from = NULL
       WHERE ${IN_CLAIM_BATCH} AND ${claimable('?2', '?2', STATUS_AS_FILTER)} AND ${NAMED_DUE} AND ${which}
       RETURNING ${CLAIMED_COLUMNS}`,
    )
    .bind(claims, now, leaseUntil, token, windowSeconds, mark, transports)
}

/**
 * The state of the notifications a claim neither took nor ended, read after
 * it — only they need it, and most claims take their notification.
 * Parameters: JSON array of ids.
 */
export function notificationStates(db: D1Database, ids: readonly string[]): D1PreparedStatement {
  return db
    .prepare(
      'SELECT id, status, scheduled_at, lease_until FROM notifications WHERE id IN (SELECT value FROM json_each(?1))',
    )
    .bind(JSON.stringify(ids))
}
