-- notify-edge D1 schema, part 6: notifications without a misnamed column.
--
-- `notifications.source_message_id` never held the source's message id: it held the event id,
-- the same value as `event_id`, as the first column of the business dedup (INV-NTF-1). The table
-- is rebuilt without it, and the dedup names what it holds: UNIQUE(event_id, recipient_user_id,
-- channel, kind). Rows, indexes and the counting triggers are carried over unchanged; the copy
-- does not fire the triggers (they belong to the old table), so counters stay as they were.

CREATE TABLE notifications_rebuilt (
  id                TEXT PRIMARY KEY,
  idempotency_key   TEXT NOT NULL,           -- of the event that made it
  event_id          TEXT NOT NULL,           -- ArtHunt eventId / PIN message-id
  source            TEXT NOT NULL,
  kind              TEXT NOT NULL,
  channel           TEXT NOT NULL,
  urgency           TEXT NOT NULL,
  recipient_user_id TEXT NOT NULL,
  recipient_email   TEXT,                    -- snapshot at enqueue
  recipient_name    TEXT,
  locale            TEXT,
  time_zone         TEXT,
  subject           TEXT,
  text_body         TEXT,
  html_body         TEXT,
  template_version  INTEGER,
  status            TEXT NOT NULL CHECK (status IN
                      ('pending', 'sending', 'sent', 'failed', 'undeliverable', 'superseded', 'suppressed')),
  status_reason     TEXT,
  error_code        TEXT,
  is_fallback       INTEGER NOT NULL DEFAULT 0,
  decision_person   TEXT,
  decision_request  TEXT,
  scheduled_at      TEXT NOT NULL,
  enqueued_at       TEXT,
  lease_until       TEXT,
  send_attempts     INTEGER NOT NULL DEFAULT 0,
  provider_id       TEXT,
  trace_id          TEXT,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  sent_at           TEXT,
  claim_token       TEXT,
  decision_at       TEXT,
  UNIQUE (event_id, recipient_user_id, channel, kind)
);

INSERT INTO notifications_rebuilt
  (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at)
SELECT id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at
FROM notifications;

DROP TABLE notifications;
ALTER TABLE notifications_rebuilt RENAME TO notifications;

CREATE INDEX notifications_idempotency_key ON notifications (idempotency_key);
CREATE INDEX notifications_event_id ON notifications (event_id);
CREATE INDEX notifications_due ON notifications (status, scheduled_at);
CREATE INDEX notifications_decision ON notifications (decision_person) WHERE decision_person IS NOT NULL;
CREATE INDEX notifications_claim ON notifications (claim_token) WHERE claim_token IS NOT NULL;

-- notify_notifications_total{channel,kind,status}: every notification entering a status (as in 0004).
CREATE TRIGGER notifications_count_insert AFTER INSERT ON notifications
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_notifications_total', json_object('channel', NEW.channel, 'kind', NEW.kind, 'status', NEW.status), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER notifications_count_status AFTER UPDATE OF status ON notifications
WHEN OLD.status <> NEW.status
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_notifications_total', json_object('channel', NEW.channel, 'kind', NEW.kind, 'status', NEW.status), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;
