-- notify-edge D1 schema, part 1: the processed-event log and the dead-letter store.
-- Timestamps are ISO-8601 UTC text (they sort as they read).

-- One row per event the notify-events consumer finished with; its primary key is the
-- consumer idempotency key (arthunt:{eventType}:{eventId},
-- notifications-profile:{EventType}:{MessageId}), so D1 is the authority on duplicates.
CREATE TABLE processed_events (
  idempotency_key   TEXT PRIMARY KEY,
  event_id          TEXT NOT NULL,
  contract          TEXT NOT NULL,           -- arthunt | pin
  event_type        TEXT NOT NULL,
  source            TEXT NOT NULL,           -- postgres | rabbitmq | kafka | http
  origin            TEXT NOT NULL,
  source_message_id TEXT NOT NULL,
  outcome           TEXT NOT NULL,
  received_at       TEXT NOT NULL,           -- when the bridge read it
  processed_at      TEXT NOT NULL
) WITHOUT ROWID;

CREATE INDEX processed_events_event_id ON processed_events (event_id);
CREATE INDEX processed_events_processed_at ON processed_events (processed_at);

-- Messages that will not succeed by themselves. One row per failing message
-- (id = sha256 of queue + message identity), however often it is delivered.
CREATE TABLE dead_letters (
  id                TEXT PRIMARY KEY,
  queue             TEXT NOT NULL,           -- the queue it died on
  code              TEXT NOT NULL,           -- NTF_* code of the last failure
  error             TEXT NOT NULL,           -- last error, names the field for NTF_INVALID_PAYLOAD
  attempts          INTEGER,                 -- deliveries before it died; NULL when Cloudflare moved it
  source            TEXT,
  origin            TEXT,
  source_message_id TEXT,
  event_id          TEXT,
  event_type        TEXT,
  body              TEXT NOT NULL,           -- the original queue message, JSON
  history           TEXT NOT NULL,           -- JSON array of {at, code, error, attempts}, one per failure
  failure_id        TEXT NOT NULL,           -- identity of the last failure; a redelivery of it changes nothing
  failures          INTEGER NOT NULL DEFAULT 1,
  first_seen        TEXT NOT NULL,
  last_seen         TEXT NOT NULL,
  status            TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'replayed', 'discarded')),
  replays           INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX dead_letters_status_seen ON dead_letters (status, first_seen, id);
CREATE INDEX dead_letters_event_id ON dead_letters (event_id);
CREATE INDEX dead_letters_code ON dead_letters (code, first_seen, id);
