import { claimable, sameDecisionSql } from './sql.ts'

/** A notification as the dispatcher reads it after its claim. */
export type ClaimedRow = {
  id: string
  kind: string
  channel: string
  status: string
  event_id: string
  source: string
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
  /** The batch it is sent with (src/notifications/batch.ts), or null when it is sent alone. */
  batch_id: string | null
  batch_position: number | null
  /** 1 when it must not join a batch (one it was in was refused as invalid). */
  send_alone: number
}

/** The columns of a `ClaimedRow`, as every statement that hands a claimed notification to a send returns them. */
export const CLAIMED_COLUMNS = `id, kind, channel, status, event_id, source, recipient_email, recipient_name, subject,
  text_body, html_body, scheduled_at, lease_until, send_attempts, trace_id, unsubscribe_url, batch_id, batch_position,
  send_alone`

// A row is a fallback (is_fallback = 1) or not, so at most one of the two ends it.
const FALLBACK_SUPERSEDED = `is_fallback = 1 AND provider_id IS NULL
  AND EXISTS (SELECT 1 FROM notifications a WHERE a.is_fallback = 0 AND ${sameDecisionSql('a', '?3')})`
const AUTHORITATIVE_SUPERSEDED = `is_fallback = 0 AND decision_person IS NOT NULL
  AND EXISTS (SELECT 1 FROM notifications f WHERE f.is_fallback = 1 AND f.status = 'sent'
              AND ${sameDecisionSql('f', '?3')})`

/**
 * Ends a pending verification decision that the other source's notification
 * settles, so the owner gets one email per decision — one statement for both
 * directions (a row is one or the other), as they run in every claim:
 *
 * - a fallback (from person-upserted) whose authoritative notification
 *   exists is superseded — unless it may have gone out already (it has a
 *   provider id: its outcome was unknown and no event settled it), in which
 *   case it is sent again under its Message-ID and supersedes the
 *   authoritative one;
 * - an authoritative decision whose fallback was sent is superseded by that
 *   fallback. A fallback still in flight (`sending`, `unknown`) supersedes
 *   nothing: if it then fails, the authoritative decision (with its reason)
 *   is what reaches the owner; until it is settled, the claim holds the
 *   authoritative one (see `claimNotification`).
 *
 * Parameters: id, now, match window in seconds.
 */
export function supersedeDecision(db: D1Database, id: string, now: string, windowSeconds: number): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'superseded', updated_at = ?2,
         status_reason = CASE WHEN is_fallback = 1
           THEN 'the decision was notified from verification-requests (authoritative)'
           ELSE 'the same decision was already sent from person-upserted' END
       WHERE id = ?1 AND status = 'pending' AND batch_id IS NULL AND ((${FALLBACK_SUPERSEDED}) OR (${AUTHORITATIVE_SUPERSEDED}))
       RETURNING id, kind, channel`,
    )
    .bind(id, now, windowSeconds)
}

/**
 * Claims a due notification for sending under `token`: `pending → sending`
 * with a lease, or takes over a `sending` one whose lease ran out. One
 * statement, so exactly one of several concurrent deliveries wins. A message
 * that names a `due` other than the row's is stale and claims nothing. An
 * authoritative decision whose fallback is in flight is not claimed until
 * that fallback is settled: never two emails for one decision, and none lost.
 * Parameters: id, now, lease until, claim token, due (or null), match window in seconds.
 */
export function claimNotification(
  db: D1Database,
  id: string,
  now: string,
  leaseUntil: string,
  token: string,
  due: string | null,
  windowSeconds: number,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'sending', lease_until = ?3, claim_token = ?4,
         send_attempts = send_attempts + 1, updated_at = ?2, claimed_at = ?2
       WHERE id = ?1 AND ${claimable('?2', '?2')} AND (?5 IS NULL OR scheduled_at = ?5)
         AND NOT (is_fallback = 0 AND decision_person IS NOT NULL
                  AND EXISTS (SELECT 1 FROM notifications f WHERE f.is_fallback = 1
                              AND f.status IN ('sending', 'unknown') AND ${sameDecisionSql('f', '?6')}))
       RETURNING ${CLAIMED_COLUMNS}`,
    )
    .bind(id, now, leaseUntil, token, due, windowSeconds)
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
