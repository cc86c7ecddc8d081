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

/**
 * Ends a pending fallback decision (from person-upserted) whose authoritative
 * notification exists — unless it may have gone out already (it has a
 * provider id: its outcome was unknown and no event settled it), in which case
 * it is sent again under its Message-ID and supersedes the authoritative one.
 * Parameters: id, now, match window in seconds.
 */
export function supersedeFallback(db: D1Database, id: string, now: string, windowSeconds: number): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'superseded', updated_at = ?2,
         status_reason = 'the decision was notified from verification-requests (authoritative)'
       WHERE id = ?1 AND status = 'pending' AND is_fallback = 1 AND provider_id IS NULL AND batch_id IS NULL
         AND EXISTS (SELECT 1 FROM notifications a WHERE a.is_fallback = 0 AND ${sameDecisionSql('a', '?3')})
       RETURNING id, kind, channel`,
    )
    .bind(id, now, windowSeconds)
}

/**
 * Ends a pending authoritative decision whose fallback was sent, so the owner
 * gets one email per decision: it is superseded by that fallback. A fallback
 * still in flight (`sending`, `unknown`) supersedes nothing: if it then fails,
 * the authoritative decision (with its reason) is what reaches the owner;
 * until it is settled, the claim holds the authoritative one (see
 * `claimNotification`). Parameters: id, now, match window in seconds.
 */
export function supersedeAuthoritative(
  db: D1Database,
  id: string,
  now: string,
  windowSeconds: number,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'superseded', updated_at = ?2,
         status_reason = 'the same decision was already sent from person-upserted'
       WHERE id = ?1 AND status = 'pending' AND is_fallback = 0 AND decision_person IS NOT NULL AND batch_id IS NULL
         AND EXISTS (SELECT 1 FROM notifications f WHERE f.is_fallback = 1 AND f.status = 'sent'
                     AND ${sameDecisionSql('f', '?3')})
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

/** The state of a notification after the claim statements. Parameters: id. */
export function notificationState(db: D1Database, id: string): D1PreparedStatement {
  return db.prepare('SELECT id, status, scheduled_at, lease_until FROM notifications WHERE id = ?1').bind(id)
}
