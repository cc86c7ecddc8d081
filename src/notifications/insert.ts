import type { NotificationRow } from './row.ts'

/**
 * Inserts a notification unless (event, recipient, channel, kind) already has
 * one (INV-NTF-1). Parameters: the fields of `NotificationRow`, now, decision time, unsubscribe link,
 * the address's pseudonym.
 */
export function insertNotification(db: D1Database, row: NotificationRow, now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO notifications
         (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
          recipient_email, recipient_name, locale, time_zone, subject, text_body, html_body, template_version,
          status, status_reason, error_code, is_fallback, decision_person, decision_request, scheduled_at,
          trace_id, enqueued_at, created_at, updated_at, decision_at, unsubscribe_url, model, recipient_hash)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,
          ?22, ?23, ?24, ?25, ?25, ?25, ?26, ?27, ?28, ?29)
       ON CONFLICT DO NOTHING`,
    )
    .bind(
      row.id,
      row.idempotencyKey,
      row.eventId,
      row.source,
      row.kind,
      row.channel,
      row.urgency,
      row.recipientUserId,
      row.recipientEmail,
      row.recipientName,
      row.locale,
      row.timeZone,
      row.subject,
      row.textBody,
      row.htmlBody,
      row.templateVersion,
      row.status,
      row.statusReason,
      row.errorCode,
      row.isFallback ? 1 : 0,
      row.decisionPerson,
      row.decisionRequest,
      row.scheduledAt,
      row.traceId,
      now,
      row.decisionAt,
      row.unsubscribeUrl,
      row.model,
      row.recipientHash,
    )
}
