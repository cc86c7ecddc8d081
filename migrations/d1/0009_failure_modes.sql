-- notify-edge D1 schema, part 9: the failure modes of a real deployment.
--
-- `notifications` is rebuilt (SQLite cannot change a CHECK in place) for three new statuses:
--   paused           — its transport is paused by a failure of our own configuration (a revoked
--                      key, an unverified sender, a quota); it waits, and is released when a probe
--                      send is accepted;
--   awaiting-contact — its recipient is not in the contact replica yet; the contact's upsert
--                      releases it, and `scheduled_at` is the end of the wait (CONTACT_WAIT_HOURS);
--   unknown          — sent through a transport without an idempotency key, but whether the
--                      provider took it is not known (a lost answer, a lost mark); the provider's
--                      delivery events settle it, else it is sent again at `scheduled_at`.
-- `model` keeps what a template needs to render an awaiting-contact notification once its
-- contact arrives. Rows, indexes and triggers are carried over; the copy does not fire the
-- counting triggers (they belong to the old table).

CREATE TABLE notifications_rebuilt (
  id                TEXT PRIMARY KEY,
  idempotency_key   TEXT NOT NULL,
  event_id          TEXT NOT NULL,
  source            TEXT NOT NULL,
  kind              TEXT NOT NULL,
  channel           TEXT NOT NULL,
  urgency           TEXT NOT NULL,
  recipient_user_id TEXT NOT NULL,
  recipient_email   TEXT,
  recipient_name    TEXT,
  locale            TEXT,
  time_zone         TEXT,
  subject           TEXT,
  text_body         TEXT,
  html_body         TEXT,
  template_version  INTEGER,
  status            TEXT NOT NULL CHECK (status IN
                      ('pending', 'sending', 'sent', 'failed', 'undeliverable', 'superseded', 'suppressed',
                       'opted-out', 'paused', 'awaiting-contact', 'unknown')),
  status_reason     TEXT,
  error_code        TEXT,
  is_fallback       INTEGER NOT NULL DEFAULT 0,
  decision_person   TEXT,
  decision_request  TEXT,
  scheduled_at      TEXT NOT NULL,           -- when the next step is due: a send, a retry, the end of a wait
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
  unsubscribe_url   TEXT,
  delivery_status   TEXT CHECK (delivery_status IN ('delivered', 'deferred', 'bounced', 'complained', 'failed')),
  delivery_at       TEXT,
  model             TEXT,                    -- JSON template model of an awaiting-contact notification
  UNIQUE (event_id, recipient_user_id, channel, kind)
);

INSERT INTO notifications_rebuilt
  (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at, unsubscribe_url, delivery_status, delivery_at)
SELECT id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at, unsubscribe_url, delivery_status, delivery_at
FROM notifications;

DROP TABLE notifications;
ALTER TABLE notifications_rebuilt RENAME TO notifications;

CREATE INDEX notifications_idempotency_key ON notifications (idempotency_key);
CREATE INDEX notifications_event_id ON notifications (event_id);
CREATE INDEX notifications_due ON notifications (status, scheduled_at);
CREATE INDEX notifications_decision ON notifications (decision_person) WHERE decision_person IS NOT NULL;
CREATE INDEX notifications_claim ON notifications (claim_token) WHERE claim_token IS NOT NULL;
CREATE INDEX notifications_provider_id ON notifications (provider_id) WHERE provider_id IS NOT NULL;
CREATE INDEX notifications_awaiting ON notifications (recipient_user_id) WHERE status = 'awaiting-contact';

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

-- A transport paused by a failure of our own configuration. One row while paused; deleted when
-- a send through it is accepted again. `probe_at`: when the next single notification may be
-- tried; `probe_id`: the notification being tried now (NULL between probes).
CREATE TABLE transport_pauses (
  transport   TEXT PRIMARY KEY,
  code        TEXT NOT NULL,                 -- the provider's error code or HTTP status that paused it
  reason      TEXT NOT NULL,                 -- what the provider said (no address, no name)
  since       TEXT NOT NULL,
  failures    INTEGER NOT NULL DEFAULT 1,    -- consecutive probes refused, for the backoff
  probe_at    TEXT NOT NULL,
  probe_id    TEXT,
  updated_at  TEXT NOT NULL
) WITHOUT ROWID;

-- An operator's correction of a contact is kept apart from the producer's versions: it changes
-- the fields and says when, and leaves `version` to the producer, whose next real update
-- (a higher version) replaces the correction.
ALTER TABLE contacts ADD COLUMN operator_edited_at TEXT;
