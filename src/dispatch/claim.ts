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
}

// Whether two verification notifications are about the same decision: same person and
// decision, and the same request when both name one.
const SAME_DECISION = (other: string) => `${other}.decision_person = notifications.decision_person
  AND (${other}.decision_request IS NULL OR notifications.decision_request IS NULL
       OR ${other}.decision_request = notifications.decision_request)`

/**
 * Ends a pending fallback decision (from person-upserted) whose authoritative
 * notification exists. Parameters: id, now.
 */
export function supersedeFallback(db: D1Database, id: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'superseded', updated_at = ?2,
         status_reason = 'the decision was notified from verification-requests (authoritative)'
       WHERE id = ?1 AND status = 'pending' AND is_fallback = 1
         AND EXISTS (SELECT 1 FROM notifications a WHERE a.is_fallback = 0 AND ${SAME_DECISION('a')})
       RETURNING id, kind, channel`,
    )
    .bind(id, now)
}

/**
 * Ends a pending authoritative decision whose fallback is already being sent
 * or was sent, so the owner gets one email per decision. Parameters: id, now.
 */
export function suppressAuthoritative(db: D1Database, id: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'suppressed', updated_at = ?2,
         status_reason = 'the same decision was already sent from person-upserted'
       WHERE id = ?1 AND status = 'pending' AND is_fallback = 0 AND decision_person IS NOT NULL
         AND EXISTS (SELECT 1 FROM notifications f WHERE f.is_fallback = 1 AND f.status IN ('sending', 'sent')
                     AND ${SAME_DECISION('f')})
       RETURNING id, kind, channel`,
    )
    .bind(id, now)
}

/**
 * Claims a due notification for sending: `pending → sending` with a lease, or
 * takes over a `sending` one whose lease ran out. One statement, so exactly one
 * of several concurrent deliveries wins. Parameters: id, now, lease until.
 */
export function claimNotification(db: D1Database, id: string, now: string, leaseUntil: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'sending', lease_until = ?3, send_attempts = send_attempts + 1, updated_at = ?2
       WHERE id = ?1 AND scheduled_at <= ?2
         AND (status = 'pending' OR (status = 'sending' AND lease_until < ?2))
       RETURNING id, kind, channel, status, event_id, source, recipient_email, recipient_name, subject, text_body,
                 html_body, scheduled_at, lease_until, trace_id`,
    )
    .bind(id, now, leaseUntil)
}

/** The state of a notification after the claim statements. Parameters: id. */
export function notificationState(db: D1Database, id: string): D1PreparedStatement {
  return db.prepare('SELECT id, status, scheduled_at, lease_until FROM notifications WHERE id = ?1').bind(id)
}

/** Marks a claimed notification sent. Parameters: id, provider id, now. */
export function markSent(db: D1Database, id: string, providerId: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'sent', provider_id = ?2, sent_at = ?3, updated_at = ?3, lease_until = NULL,
         error_code = NULL, status_reason = NULL
       WHERE id = ?1 AND status = 'sending'`,
    )
    .bind(id, providerId, now)
}

/** Keeps the exact message handed to the transport. Parameters: id, transport, Message-ID, raw MIME, now. */
export function recordSentMessage(
  db: D1Database,
  id: string,
  transport: string,
  messageId: string,
  raw: string,
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO sent_messages (notification_id, transport, message_id, raw, sent_at) VALUES (?1, ?2, ?3, ?4, ?5)
       ON CONFLICT (notification_id) DO UPDATE SET transport = excluded.transport, message_id = excluded.message_id,
         raw = excluded.raw, sent_at = excluded.sent_at`,
    )
    .bind(id, transport, messageId, raw, now)
}

/**
 * Releases or ends a claimed notification after a failed send: back to
 * `pending` for a retry, or `failed` for good. Parameters: id, status, code, reason, now.
 */
export function markSendFailure(
  db: D1Database,
  id: string,
  status: 'pending' | 'failed',
  code: string,
  reason: string,
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = ?2, error_code = ?3, status_reason = ?4, updated_at = ?5, lease_until = NULL
       WHERE id = ?1 AND status = 'sending'`,
    )
    .bind(id, status, code, reason, now)
}
