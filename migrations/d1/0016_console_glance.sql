-- notify-edge D1 schema, part 16: the console at a glance, read without scanning notifications
-- or asking Resend on every page view.
--
-- 1. The overview's "ended, last 24 h" card comes from the buckets. The cron now buckets every
--    final status of notify_notifications_total (src/metrics/series.ts, TALLIED), not only the
--    four charted ones. What those newly bucketed counters hold now is history: marked as already
--    bucketed, so the first minute does not show all of it at once.
INSERT INTO counter_marks (name, labels, value)
SELECT name, labels, value FROM counters
WHERE name = 'notify_notifications_total'
  AND json_extract(labels, '$.status') IN ('undeliverable', 'superseded', 'digested', 'throttled')
ON CONFLICT (name, labels) DO UPDATE SET value = excluded.value;

-- 2. The last answer of a slow outside check, by name (`resend-domain:<domain>`): every console
--    page shows the doctor's findings, and Resend is asked about the sender's domain at most once
--    a minute for them (src/health/remembered.ts). One row per check, overwritten.
CREATE TABLE health_checks (
  name       TEXT PRIMARY KEY,
  result     TEXT NOT NULL,
  checked_at TEXT NOT NULL
) WITHOUT ROWID;
