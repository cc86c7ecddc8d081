-- Capacity (issue 38), continued: a processed mark keyed by its event.
--
-- Every event wrote its mark three times: the row, `processed_events_event_id` (an event's story,
-- GET /v1/events/{id}) and `processed_events_processed_at` (retention). Keyed by (event id,
-- idempotency key) — the key names its event, so it is as unique as before — the story reads an
-- event's marks from the primary key and that index goes: one row written less per event. The
-- batch's lookups name both (src/materialize/context.ts, src/metrics/counters.ts); retention deletes
-- by both.
--
-- The marks go to a new table, `processed_marks`, and the old one is neither copied nor changed:
-- - a copy is one statement, and 2.3 million marks (ten million emails a month, a week kept) took
--   45 to 70 s here, past the 30 s D1 gives a query;
-- - the Worker that runs while a deploy has applied this migration and not yet switched versions
--   still writes `processed_events` with `ON CONFLICT (idempotency_key)`, which a table keyed
--   otherwise would refuse: every event would fail until the new version is live.
-- Nothing of this version writes `processed_events`; it reads it beside `processed_marks` (the
-- batch's lookup, a new mark's guard, the story, the console's search) and retention drains it
-- (PROCESSED_EVENTS_RETENTION_DAYS), after which a search of it reads nothing.
CREATE TABLE processed_marks (
  idempotency_key   TEXT NOT NULL,
  event_id          TEXT NOT NULL,
  contract          TEXT NOT NULL,           -- arthunt | pin
  event_type        TEXT NOT NULL,
  source            TEXT NOT NULL,           -- postgres | rabbitmq | kafka | http
  origin            TEXT NOT NULL,
  source_message_id TEXT NOT NULL,
  outcome           TEXT NOT NULL,
  received_at       TEXT NOT NULL,           -- when the bridge read it
  processed_at      TEXT NOT NULL,
  claim             TEXT,                    -- the run that wrote it: its counters count it
  kind              TEXT,
  trace_id          TEXT,
  PRIMARY KEY (event_id, idempotency_key)
) WITHOUT ROWID;
CREATE INDEX processed_marks_processed_at ON processed_marks (processed_at);
