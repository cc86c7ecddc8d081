-- notify-edge D1 schema, part 25: escalation and cancel.
--
-- Three statuses, so `notifications` is rebuilt (SQLite cannot change a CHECK in place):
--   escalating  — an email that waits for its in-app item: sent only if the item was not seen (or
--                 read: its kind says which) by `scheduled_at`; the recipient's feed decides once;
--   seen-in-app — such an email that was not sent, because its item was seen (or read) in time;
--   cancelled   — a notification withdrawn by its cancellation key before it went out.
-- And five columns: `escalation_of`, `escalation_unless` and `escalated_at` (the escalation's
-- in-app notification, its condition, when the feed decided), `cancellation_key` and
-- `cancelled_at`; and the table of cancellations.
-- Rows, indexes and triggers are carried over; the copy does not fire the counting triggers
-- (they belong to the old table).

CREATE TABLE notifications_rebuilt (
  id                 TEXT PRIMARY KEY,
  idempotency_key    TEXT NOT NULL,
  event_id           TEXT NOT NULL,
  source             TEXT NOT NULL,
  kind               TEXT NOT NULL,
  channel            TEXT NOT NULL,
  urgency            TEXT NOT NULL,
  recipient_user_id  TEXT NOT NULL,
  recipient_email    TEXT,
  recipient_name     TEXT,
  locale             TEXT,
  time_zone          TEXT,
  subject            TEXT,
  text_body          TEXT,
  html_body          TEXT,
  template_version   INTEGER,
  status             TEXT NOT NULL CHECK (status IN
                       ('pending', 'sending', 'sent', 'failed', 'undeliverable', 'superseded', 'suppressed',
                        'opted-out', 'paused', 'awaiting-contact', 'unknown', 'collecting', 'closing', 'digested',
                        'throttled', 'escalating', 'seen-in-app', 'cancelled')),
  status_reason      TEXT,
  error_code         TEXT,
  is_fallback        INTEGER NOT NULL DEFAULT 0,
  decision_person    TEXT,
  decision_request   TEXT,
  scheduled_at       TEXT NOT NULL,          -- when the next step is due: a send, a retry, the end of a wait, a digest's close
  enqueued_at        TEXT,
  lease_until        TEXT,
  send_attempts      INTEGER NOT NULL DEFAULT 0,
  provider_id        TEXT,
  trace_id           TEXT,
  created_at         TEXT NOT NULL,
  updated_at         TEXT NOT NULL,
  sent_at            TEXT,
  claim_token        TEXT,
  decision_at        TEXT,
  unsubscribe_url    TEXT,
  delivery_status    TEXT CHECK (delivery_status IN ('delivered', 'deferred', 'bounced', 'complained', 'failed')),
  delivery_at        TEXT,
  model              TEXT,                   -- JSON template model: of a notification awaiting its contact, of a digest's member
  content_removed_at TEXT,
  content_removed_by TEXT CHECK (content_removed_by IN ('retention', 'erasure')),
  recipient_hash     TEXT,
  claimed_at         TEXT,
  batch_id           TEXT,
  batch_position     INTEGER,
  send_alone         INTEGER NOT NULL DEFAULT 0,
  -- 1 for a digest's own row (the email); its members name it in `digest_id`.
  is_digest          INTEGER NOT NULL DEFAULT 0 CHECK (is_digest IN (0, 1)),
  -- The digest a member was told in. Set with `digested`, and never without it.
  digest_id          TEXT,
  -- How many notifications a digest told, written when it closes.
  digest_size        INTEGER,
  maybe_sent_at      TEXT,
  throttled          INTEGER NOT NULL DEFAULT 0,
  transport          TEXT,
  count_mark         INTEGER,
  -- An email that waits for its in-app item: the in-app notification whose item decides, and
  -- which mark spares the email ('seen' or 'read'); when the feed decided, once it has.
  escalation_of      TEXT,
  escalation_unless  TEXT CHECK (escalation_unless IN ('seen', 'read')),
  escalated_at       TEXT,
  -- The key a cancellation names to withdraw this notification (an invitation's id …), and when
  -- one did: also on a notification it came too late for (in flight), so that a retry of it is
  -- ended `cancelled` at its claim instead of sent.
  cancellation_key   TEXT,
  cancelled_at       TEXT,
  UNIQUE (event_id, recipient_user_id, channel, kind),
  CHECK ((status = 'digested') = (digest_id IS NOT NULL)),
  CHECK (is_digest = 1 OR status NOT IN ('collecting', 'closing'))
);

INSERT INTO notifications_rebuilt
  (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at, unsubscribe_url, delivery_status, delivery_at, model,
   content_removed_at, content_removed_by, recipient_hash, claimed_at, batch_id, batch_position, send_alone,
   is_digest, digest_id, digest_size, maybe_sent_at, throttled, transport, count_mark)
SELECT id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at, unsubscribe_url, delivery_status, delivery_at, model,
   content_removed_at, content_removed_by, recipient_hash, claimed_at, batch_id, batch_position, send_alone,
   is_digest, digest_id, digest_size, maybe_sent_at, throttled, transport, count_mark
FROM notifications;

-- delivery_events' counting trigger reads notifications: dropped while the table is replaced, then made again.
DROP TRIGGER delivery_events_count;
DROP TABLE notifications;
ALTER TABLE notifications_rebuilt RENAME TO notifications;

CREATE TRIGGER delivery_events_count AFTER INSERT ON delivery_events
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_deliveries_total',
          json_object('kind', coalesce((SELECT kind FROM notifications WHERE id = NEW.notification_id), 'unknown'),
                      'status', NEW.status, 'transport', NEW.provider),
          1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

CREATE INDEX notifications_awaiting ON notifications (recipient_user_id) WHERE status = 'awaiting-contact';

CREATE INDEX notifications_batch ON notifications (batch_id, batch_position) WHERE batch_id IS NOT NULL;

CREATE UNIQUE INDEX notifications_collecting ON notifications (recipient_user_id, kind, channel)
  WHERE status = 'collecting';

CREATE INDEX notifications_decision ON notifications (decision_person) WHERE decision_person IS NOT NULL;

CREATE INDEX notifications_digest ON notifications (digest_id, created_at) WHERE digest_id IS NOT NULL;

CREATE INDEX notifications_due ON notifications (status, scheduled_at);

CREATE INDEX notifications_provider_id ON notifications (provider_id) WHERE provider_id IS NOT NULL;

CREATE INDEX notifications_stubs ON notifications (created_at) WHERE content_removed_at IS NOT NULL;

CREATE INDEX notifications_throttled ON notifications (recipient_user_id, kind, channel, status, sent_at)
  WHERE throttled = 1;

CREATE INDEX notifications_unpruned ON notifications (created_at) WHERE content_removed_at IS NULL;

CREATE TRIGGER notifications_count_digest_insert AFTER INSERT ON notifications
WHEN NEW.is_digest = 1
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_digests_total', json_object('channel', NEW.channel, 'kind', NEW.kind, 'status', NEW.status), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER notifications_count_digest_status AFTER UPDATE OF status ON notifications
WHEN NEW.is_digest = 1 AND OLD.status <> NEW.status
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_digests_total', json_object('channel', NEW.channel, 'kind', NEW.kind, 'status', NEW.status), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER notifications_count_insert AFTER INSERT ON notifications
WHEN NEW.count_mark IS NULL
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_notifications_total', json_object('channel', NEW.channel, 'kind', NEW.kind, 'status', NEW.status), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER notifications_count_status AFTER UPDATE OF status ON notifications
WHEN OLD.status <> NEW.status AND NEW.count_mark IS OLD.count_mark
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_notifications_total', json_object('channel', NEW.channel, 'kind', NEW.kind, 'status', NEW.status), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

-- The notifications a cancellation key names, to withdraw what has not gone out.
CREATE INDEX notifications_cancellation ON notifications (cancellation_key) WHERE cancellation_key IS NOT NULL;

-- Each key cancelled, once (the primary database's): an event of that key that arrives after its
-- cancellation — out of order across sources — creates nothing.
CREATE TABLE cancellations (
  key          TEXT PRIMARY KEY,
  cancelled_at TEXT NOT NULL,
  source       TEXT NOT NULL CHECK (source IN ('event', 'api')),
  -- The cancelling event's idempotency key, or the operator's name.
  by           TEXT NOT NULL,
  reason       TEXT
);
-- Retention deletes the oldest first (PROCESSED_EVENTS_RETENTION_DAYS, the deduplication horizon).
CREATE INDEX cancellations_at ON cancellations (cancelled_at);

-- InvitationCreated gains in-app templates: its in-app channel is written turned off, as
-- ResponseCreated's was (part 24), for a deployment to turn on.
INSERT OR IGNORE INTO channel_policies (kind, urgency, channel, enabled)
SELECT 'InvitationCreated', urgency.value, 'in-app', 0
FROM json_each('["low","normal","high"]') AS urgency;
