-- notify-edge D1 schema, part 4: what the operator API and /metrics read.

-- The kind a dead letter was about, when known (filter of GET /v1/dead-letters).
ALTER TABLE dead_letters ADD COLUMN kind TEXT;
-- Why an operator discarded it.
ALTER TABLE dead_letters ADD COLUMN discard_reason TEXT;
ALTER TABLE dead_letters ADD COLUMN replayed_at TEXT;
CREATE INDEX dead_letters_seen ON dead_letters (first_seen, id);

-- Gauges for /metrics (last value wins), e.g. consumer lag per source.
CREATE TABLE gauges (
  name       TEXT NOT NULL,
  labels     TEXT NOT NULL,
  value      REAL NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (name, labels)
) WITHOUT ROWID;

-- Counters that follow rows are kept by triggers, in the same transaction as the
-- change itself: exact under retries and races, and no table scan at scrape time.

-- notify_notifications_total{channel,kind,status}: every notification entering a status.
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

-- notify_dead_letters_open{code,queue}: open dead letters right now.
CREATE TRIGGER dead_letters_open_insert AFTER INSERT ON dead_letters
WHEN NEW.status = 'open'
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_dead_letters_open', json_object('code', NEW.code, 'queue', NEW.queue), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER dead_letters_open_leave AFTER UPDATE OF status, code ON dead_letters
WHEN OLD.status = 'open' AND (NEW.status <> 'open' OR NEW.code <> OLD.code)
BEGIN
  UPDATE counters SET value = value - 1
  WHERE name = 'notify_dead_letters_open' AND labels = json_object('code', OLD.code, 'queue', OLD.queue);
END;

CREATE TRIGGER dead_letters_open_enter AFTER UPDATE OF status, code ON dead_letters
WHEN NEW.status = 'open' AND (OLD.status <> 'open' OR NEW.code <> OLD.code)
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_dead_letters_open', json_object('code', NEW.code, 'queue', NEW.queue), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;
