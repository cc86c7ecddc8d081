-- notify-edge D1 schema, part 15: the counters over time, for the console's charts and rates.
--
-- `counters` holds totals since the beginning. The cron turns them into time buckets once a
-- minute (src/metrics/buckets.ts): what each charted counter gained since its last run goes into
-- that minute's bucket, and the previous hour is summed into an hour bucket. So a bucket costs rows
-- written per counter that moved in a minute, whatever the number of emails — nothing more is
-- written per notification, event or delivery report (docs/cost.md).

-- Per-minute and per-hour gains of a counter: `start` is the bucket's first instant (ISO 8601,
-- UTC), `value` what the counter gained in it. Minute buckets are kept 3 hours, hour buckets 8
-- days (src/maintenance/retention.ts). The key starts with (width, start): the overview reads a
-- range of starts, retention deletes the oldest.
CREATE TABLE counter_buckets (
  width  TEXT NOT NULL CHECK (width IN ('minute', 'hour')),
  start  TEXT NOT NULL,
  name   TEXT NOT NULL,
  labels TEXT NOT NULL,
  value  INTEGER NOT NULL,
  PRIMARY KEY (width, start, name, labels)
) WITHOUT ROWID;

-- Each charted counter's value when the cron last put its gain in a bucket.
CREATE TABLE counter_marks (
  name   TEXT NOT NULL,
  labels TEXT NOT NULL,
  value  INTEGER NOT NULL,
  PRIMARY KEY (name, labels)
) WITHOUT ROWID;

-- notify_deliveries_total gains the notification's kind: the console's bounce and complaint
-- rates are per kind. The same one row written per delivery event as before; the kind is read
-- from the notification by its primary key. Counts from before this migration keep their labels
-- ({status, transport}); new ones are {kind, status, transport}. A report about no known
-- notification is of kind 'unknown'.
DROP TRIGGER delivery_events_count;
CREATE TRIGGER delivery_events_count AFTER INSERT ON delivery_events
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_deliveries_total',
          json_object('kind', coalesce((SELECT kind FROM notifications WHERE id = NEW.notification_id), 'unknown'),
                      'status', NEW.status, 'transport', NEW.provider),
          1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

-- notify_dead_letters_total{code,queue}: every time a message became a dead letter — a new one,
-- or one that died again (a new failure id). notify_dead_letters_open counts what waits now; this
-- counts what happened, for the chart. It begins with the failures of the dead letters kept.
INSERT INTO counters (name, labels, value)
SELECT 'notify_dead_letters_total', json_object('code', code, 'queue', queue), sum(failures)
FROM dead_letters GROUP BY code, queue;

CREATE TRIGGER dead_letters_count_insert AFTER INSERT ON dead_letters
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_dead_letters_total', json_object('code', NEW.code, 'queue', NEW.queue), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

CREATE TRIGGER dead_letters_count_again AFTER UPDATE OF failure_id ON dead_letters
WHEN NEW.failure_id <> OLD.failure_id
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_dead_letters_total', json_object('code', NEW.code, 'queue', NEW.queue), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

-- What the counters hold now is history from before the charts: marked as already bucketed, so
-- the first minute does not show all of it at once.
INSERT INTO counter_marks (name, labels, value) SELECT name, labels, value FROM counters;
