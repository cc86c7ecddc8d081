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
  trace_id: string | null
  unsubscribe_url: string | null
}

// `sameDecision` (materialize/plan.ts) in SQL: same person and decision; the same request when
// both name one, else decided within ?3 seconds of each other (either time unknown: a match).
const SAME_DECISION = (other: string) => `${other}.decision_person = notifications.decision_person
  AND CASE WHEN ${other}.decision_request IS NOT NULL AND notifications.decision_request IS NOT NULL
           THEN ${other}.decision_request = notifications.decision_request
           ELSE ${other}.decision_at IS NULL OR notifications.decision_at IS NULL
             OR abs(julianday(${other}.decision_at) - julianday(notifications.decision_at)) * 86400 <= ?3
      END`

/**
 * Ends a pending fallback decision (from person-upserted) whose authoritative
 * notification exists. Parameters: id, now, match window in seconds.
 */
export function supersedeFallback(db: D1Database, id: string, now: string, windowSeconds: number): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'superseded', updated_at = ?2,
         status_reason = 'the decision was notified from verification-requests (authoritative)'
       WHERE id = ?1 AND status = 'pending' AND is_fallback = 1
         AND EXISTS (SELECT 1 FROM notifications a WHERE a.is_fallback = 0 AND ${SAME_DECISION('a')})
       RETURNING id, kind, channel`,
    )
    .bind(id, now, windowSeconds)
}

/**
 * Ends a pending authoritative decision whose fallback is already being sent
 * or was sent, so the owner gets one email per decision: it is superseded by
 * that fallback. Parameters: id, now, match window in seconds.
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
       WHERE id = ?1 AND status = 'pending' AND is_fallback = 0 AND decision_person IS NOT NULL
         AND EXISTS (SELECT 1 FROM notifications f WHERE f.is_fallback = 1 AND f.status IN ('sending', 'sent')
                     AND ${SAME_DECISION('f')})
       RETURNING id, kind, channel`,
    )
    .bind(id, now, windowSeconds)
}

/**
 * Claims a due notification for sending under `token`: `pending → sending`
 * with a lease, or takes over a `sending` one whose lease ran out. One
 * statement, so exactly one of several concurrent deliveries wins.
 * Parameters: id, now, lease until, claim token.
 */
export function claimNotification(
  db: D1Database,
  id: string,
  now: string,
  leaseUntil: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'sending', lease_until = ?3, claim_token = ?4,
         send_attempts = send_attempts + 1, updated_at = ?2
       WHERE id = ?1 AND scheduled_at <= ?2
         AND (status = 'pending' OR (status = 'sending' AND lease_until < ?2))
       RETURNING id, kind, channel, status, event_id, source, recipient_email, recipient_name, subject, text_body,
                 html_body, scheduled_at, lease_until, trace_id, unsubscribe_url`,
    )
    .bind(id, now, leaseUntil, token)
}

/**
 * Extends the lease of every notification still `sending` under `token`.
 * Parameters: claim token, lease until, now.
 */
export function renewLease(db: D1Database, token: string, leaseUntil: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET lease_until = ?2, updated_at = ?3
       WHERE claim_token = ?1 AND status = 'sending'`,
    )
    .bind(token, leaseUntil, now)
}

/** The state of a notification after the claim statements. Parameters: id. */
export function notificationState(db: D1Database, id: string): D1PreparedStatement {
  return db.prepare('SELECT id, status, scheduled_at, lease_until FROM notifications WHERE id = ?1').bind(id)
}

/**
 * Marks a notification sent, only under the claim that sent it.
 * Parameters: id, provider id, now, claim token.
 */
export function markSent(
  db: D1Database,
  id: string,
  providerId: string,
  now: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'sent', provider_id = ?2, sent_at = ?3, updated_at = ?3, lease_until = NULL,
         error_code = NULL, status_reason = NULL
       WHERE id = ?1 AND status = 'sending' AND claim_token = ?4`,
    )
    .bind(id, providerId, now, token)
}

/**
 * Keeps the exact message handed to the transport, when the mark before it in
 * the same batch succeeded under `token`. Parameters: id, transport,
 * Message-ID, raw MIME, now, claim token.
 */
export function recordSentMessage(
  db: D1Database,
  id: string,
  transport: string,
  messageId: string,
  raw: string,
  now: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO sent_messages (notification_id, transport, message_id, raw, sent_at)
       SELECT ?1, ?2, ?3, ?4, ?5
       WHERE EXISTS (SELECT 1 FROM notifications WHERE id = ?1 AND status = 'sent' AND claim_token = ?6)
       ON CONFLICT (notification_id) DO UPDATE SET transport = excluded.transport, message_id = excluded.message_id,
         raw = excluded.raw, sent_at = excluded.sent_at`,
    )
    .bind(id, transport, messageId, raw, now, token)
}

/**
 * Releases or ends a claimed notification after a failed send, only under the
 * claim that tried: back to `pending` for a retry, `failed` for good, or
 * `suppressed` when the transport refused the address as suppressed.
 * Parameters: id, status, code, reason, now, claim token.
 */
export function markSendFailure(
  db: D1Database,
  id: string,
  status: 'pending' | 'failed' | 'suppressed',
  code: string,
  reason: string,
  now: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = ?2, error_code = ?3, status_reason = ?4, updated_at = ?5, lease_until = NULL
       WHERE id = ?1 AND status = 'sending' AND claim_token = ?6`,
    )
    .bind(id, status, code, reason, now, token)
}
