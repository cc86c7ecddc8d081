-- notify-edge D1 schema, part 14: digests and throttling.
--
-- A digest is a notification row of its own: the email that tells a recipient about many events
-- of one kind. So everything that sends one notification — the claim, the recipient gates, a
-- paused transport, the pace, batches, retries, dead letters and replay — sends a digest the same
-- way. `notifications` is rebuilt (SQLite cannot change a CHECK in place) for four statuses:
--   collecting — a digest open for its recipient, kind and channel: new notifications of that
--                kind join it until `scheduled_at`, when it closes;
--   closing    — a digest being closed: fenced, so that nothing joins it any more and one
--                delivery renders it; it becomes `pending` with its content (or `failed`);
--   digested   — a notification told in a digest (`digest_id`) instead of an email of its own;
--   throttled  — a notification over its kind's throttle, for a kind without a digest to fold
--                it into: recorded, counted, not sent.
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
                        'throttled')),
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
  UNIQUE (event_id, recipient_user_id, channel, kind),
  CHECK ((status = 'digested') = (digest_id IS NOT NULL)),
  CHECK (is_digest = 1 OR status NOT IN ('collecting', 'closing'))
);

INSERT INTO notifications_rebuilt
  (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at, unsubscribe_url, delivery_status, delivery_at, model,
   content_removed_at, content_removed_by, recipient_hash, claimed_at, batch_id, batch_position, send_alone)
SELECT id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email, recipient_name,
   locale, time_zone, subject, text_body, html_body, template_version, status, status_reason, error_code, is_fallback,
   decision_person, decision_request, scheduled_at, enqueued_at, lease_until, send_attempts, provider_id, trace_id,
   created_at, updated_at, sent_at, claim_token, decision_at, unsubscribe_url, delivery_status, delivery_at, model,
   content_removed_at, content_removed_by, recipient_hash, claimed_at, batch_id, batch_position, send_alone
FROM notifications;

DROP TABLE notifications;
ALTER TABLE notifications_rebuilt RENAME TO notifications;

CREATE INDEX notifications_idempotency_key ON notifications (idempotency_key);
CREATE INDEX notifications_due ON notifications (status, scheduled_at);
CREATE INDEX notifications_decision ON notifications (decision_person) WHERE decision_person IS NOT NULL;
CREATE INDEX notifications_claim ON notifications (claim_token) WHERE claim_token IS NOT NULL;
CREATE INDEX notifications_provider_id ON notifications (provider_id) WHERE provider_id IS NOT NULL;
CREATE INDEX notifications_awaiting ON notifications (recipient_user_id) WHERE status = 'awaiting-contact';
CREATE INDEX notifications_unpruned ON notifications (created_at) WHERE content_removed_at IS NULL;
CREATE INDEX notifications_batch ON notifications (batch_id, batch_position) WHERE batch_id IS NOT NULL;
-- At most one open digest per recipient, kind and channel: a notification joins the one that is
-- open, and opens one only when none is (INSERT … ON CONFLICT DO NOTHING meets this index). A
-- digest that is closing is out of it, so an event that arrives meanwhile opens the next one.
CREATE UNIQUE INDEX notifications_collecting ON notifications (recipient_user_id, kind, channel)
  WHERE status = 'collecting';
-- A digest's members, oldest first: what its close renders and its page lists.
CREATE INDEX notifications_digest ON notifications (digest_id, created_at) WHERE digest_id IS NOT NULL;

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

-- A digest's email, apart from the notifications it tells: `notify_digests_total{kind, status}`
-- counts each digest as it reaches a status (collecting, pending, sent, failed …).
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

-- A recipient's choice of how an optional kind reaches them on a channel, beside `enabled`:
-- 'instant' or 'digest'; NULL keeps the kind's default.
ALTER TABLE preferences ADD COLUMN mode TEXT CHECK (mode IN ('instant', 'digest'));

-- A recipient's throttle window of a kind on a channel: when it began and how many notifications
-- went out in it. Anchored: the first notification after a window ended begins the next one. Only
-- kinds with a throttle write here, one row per recipient, kind and channel.
CREATE TABLE throttle_windows (
  user_id      TEXT NOT NULL,
  kind         TEXT NOT NULL,
  channel      TEXT NOT NULL,
  window_start TEXT NOT NULL,
  used         INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, kind, channel)
) WITHOUT ROWID;
