-- notify-edge D1 schema, part 7: the recipient's side of email — delivery events, suppression,
-- preferences, one-click unsubscribe.
--
-- `notifications` is rebuilt (SQLite cannot change a CHECK in place) to allow 'opted-out' and to
-- carry the unsubscribe link and the delivery status the provider reported. Until now the status
-- 'suppressed' meant "an authoritative verification decision whose fallback was already sent";
-- from here on it means "not sent: the address is on the suppression list", so those rows become
-- 'superseded' (another notification of the same decision is the one that was sent), which is
-- what their status_reason already says. Rows, indexes and triggers are carried over; the copy
-- does not fire the counting triggers (they belong to the old table).

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
                      ('pending', 'sending', 'sent', 'failed', 'undeliverable', 'superseded', 'suppressed',
                       'opted-out')),
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
  unsubscribe_url   TEXT,                    -- one-click link of an optional kind (List-Unsubscribe)
  delivery_status   TEXT CHECK (delivery_status IN ('delivered', 'deferred', 'bounced', 'complained', 'failed')),
  delivery_at       TEXT,                    -- time of the provider event that set delivery_status
  UNIQUE (event_id, recipient_user_id, channel, kind)
);

INSERT INTO notifications_rebuilt
  (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at)
SELECT id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version,
   CASE status WHEN 'suppressed' THEN 'superseded' ELSE status END, status_reason, error_code, is_fallback,
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

CREATE INDEX notifications_provider_id ON notifications (provider_id) WHERE provider_id IS NOT NULL;

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

-- Addresses not to send to: hard bounces and complaints for good, soft bounces and provider
-- refusals until a date, and operators' entries. One row per (lower-cased) address.
CREATE TABLE suppressions (
  address         TEXT PRIMARY KEY,
  cause           TEXT NOT NULL CHECK (cause IN ('hard-bounce', 'soft-bounce', 'complaint', 'provider', 'operator')),
  reason          TEXT NOT NULL,
  until           TEXT,                      -- NULL: until an operator removes it
  source          TEXT NOT NULL,             -- cloudflare | resend | operator
  notification_id TEXT,                      -- the notification whose delivery caused it, when known
  provider_event  TEXT,                      -- "{provider}:{event id}" of the delivery event that caused it
  created_at      TEXT NOT NULL,
  updated_at      TEXT NOT NULL
) WITHOUT ROWID;

-- What providers reported about sent messages, each event once (provider, its event id).
CREATE TABLE delivery_events (
  provider            TEXT NOT NULL,         -- cloudflare | resend
  provider_event_id   TEXT NOT NULL,
  provider_message_id TEXT NOT NULL,
  notification_id     TEXT,                  -- NULL when no notification has that provider message id
  type                TEXT NOT NULL,         -- the provider's event type, as it came
  status              TEXT NOT NULL CHECK (status IN ('accepted', 'delivered', 'deferred', 'bounced', 'complained', 'failed')),
  occurred_at         TEXT NOT NULL,
  received_at         TEXT NOT NULL,
  detail              TEXT,                  -- JSON: SMTP codes, bounce type, rejection reason
  PRIMARY KEY (provider, provider_event_id)
) WITHOUT ROWID;
CREATE INDEX delivery_events_notification ON delivery_events (notification_id, occurred_at)
  WHERE notification_id IS NOT NULL;

-- notify_deliveries_total{status,transport}: every delivery event recorded, once.
CREATE TRIGGER delivery_events_count AFTER INSERT ON delivery_events
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_deliveries_total', json_object('status', NEW.status, 'transport', NEW.provider), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

-- A recipient's choices per optional kind and channel; no row means "send".
CREATE TABLE preferences (
  user_id    TEXT NOT NULL,
  kind       TEXT NOT NULL,
  channel    TEXT NOT NULL,
  enabled    INTEGER NOT NULL CHECK (enabled IN (0, 1)),
  source     TEXT NOT NULL CHECK (source IN ('api', 'unsubscribe')),
  updated_at TEXT NOT NULL,
  PRIMARY KEY (user_id, kind, channel)
) WITHOUT ROWID;
