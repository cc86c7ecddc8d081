-- notify-edge D1 schema, part 2: materialization and dispatch.

-- Contact replica (fed by contact-upserted events and the API). `version` only grows:
-- an older upsert never overwrites a newer one.
CREATE TABLE contacts (
  user_id      TEXT PRIMARY KEY,
  email        TEXT NOT NULL,
  locale       TEXT,
  time_zone    TEXT,
  display_name TEXT,
  version      INTEGER NOT NULL,
  updated_at   TEXT NOT NULL
) WITHOUT ROWID;

-- Reviewers told about a verification request that names no ReviewerUserId.
CREATE TABLE reviewer_pool (
  user_id  TEXT PRIMARY KEY,
  added_at TEXT NOT NULL
) WITHOUT ROWID;

-- Which channels a kind uses at an urgency.
CREATE TABLE channel_policies (
  kind    TEXT NOT NULL,
  urgency TEXT NOT NULL CHECK (urgency IN ('low', 'normal', 'high')),
  channel TEXT NOT NULL,
  enabled INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (kind, urgency, channel)
) WITHOUT ROWID;

INSERT INTO channel_policies (kind, urgency, channel)
SELECT kind.value, urgency.value, 'email'
FROM json_each('["ResponseCreated","InvitationCreated","VerificationSubmitted","VerificationApproved","VerificationRejected"]') AS kind,
     json_each('["low","normal","high"]') AS urgency;

-- LiquidJS templates: one active version per (kind, locale, channel).
CREATE TABLE templates (
  kind       TEXT NOT NULL,
  locale     TEXT NOT NULL,
  channel    TEXT NOT NULL,
  version    INTEGER NOT NULL,
  subject    TEXT NOT NULL,
  text_body  TEXT NOT NULL,
  html_body  TEXT NOT NULL,
  active     INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  PRIMARY KEY (kind, locale, channel, version)
) WITHOUT ROWID;

CREATE UNIQUE INDEX templates_one_active ON templates (kind, locale, channel) WHERE active = 1;

-- One row per (event, recipient, channel, kind): the outbox of notify-dispatch.
CREATE TABLE notifications (
  id                TEXT PRIMARY KEY,
  idempotency_key   TEXT NOT NULL,           -- of the event that made it
  event_id          TEXT NOT NULL,
  source            TEXT NOT NULL,
  source_message_id TEXT NOT NULL,           -- the event's id (eventId / MessageId): INV-NTF-1
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
  is_fallback       INTEGER NOT NULL DEFAULT 0, -- made from person-upserted (Low urgency)
  decision_person   TEXT,                    -- "{PersonId}:{approved|rejected}" for verification decisions
  decision_request  TEXT,                    -- RequestId of that decision, when known
  scheduled_at      TEXT NOT NULL,
  enqueued_at       TEXT,
  lease_until       TEXT,
  send_attempts     INTEGER NOT NULL DEFAULT 0,
  provider_id       TEXT,
  trace_id          TEXT,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  sent_at           TEXT,
  UNIQUE (source_message_id, recipient_user_id, channel, kind)
);

CREATE INDEX notifications_event ON notifications (idempotency_key);
CREATE INDEX notifications_event_id ON notifications (event_id);
CREATE INDEX notifications_due ON notifications (status, scheduled_at);
CREATE INDEX notifications_decision ON notifications (decision_person) WHERE decision_person IS NOT NULL;

-- The exact message handed to the transport, for operators and audits.
CREATE TABLE sent_messages (
  notification_id TEXT PRIMARY KEY,
  transport       TEXT NOT NULL,
  message_id      TEXT NOT NULL,
  raw             TEXT NOT NULL,
  sent_at         TEXT NOT NULL
) WITHOUT ROWID;

-- Counters for /metrics, updated in the same D1 batch as the rows they count.
CREATE TABLE counters (
  name   TEXT NOT NULL,
  labels TEXT NOT NULL,                      -- canonical JSON object of label values
  value  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (name, labels)
) WITHOUT ROWID;

-- Which batch wrote a processed-event row: statements of that batch that must run
-- only for the winner of a concurrent duplicate (counters) check it.
ALTER TABLE processed_events ADD COLUMN claim TEXT;
ALTER TABLE processed_events ADD COLUMN kind TEXT;
ALTER TABLE processed_events ADD COLUMN trace_id TEXT;
