-- notify-edge D1 schema, part 18: what the guarantees need where two features meet (the lifecycle
-- model, test/model/, found each of these broken).

-- 1. A send that may have reached the provider without our knowing its answer (a lost answer, a
--    claim whose lease ran out before it recorded anything): the earliest time a request carrying
--    this email, under the idempotency key it has now, may have been taken. While it is set, the
--    email may have gone out: a retry must be the same request under the same key, and only
--    within the provider's idempotency window (Resend keeps a key 24 h); a verification decision
--    waits for it; a batch it is in is never left for good.
ALTER TABLE notifications ADD COLUMN maybe_sent_at TEXT;

-- 2. The throttle slides: a notification of a throttled kind that goes at once takes a place when
--    it is written (`throttled` = 1), and a recipient has at most the kind's number of places in
--    any window of its length, not per fixed window (nine emails could go out across the edge of
--    one). `places` keeps the times of the places taken that are still inside the window.
ALTER TABLE notifications ADD COLUMN throttled INTEGER NOT NULL DEFAULT 0;
-- The claim's throttle gate counts a recipient's throttled emails sent or in flight in the window.
CREATE INDEX notifications_throttled ON notifications (recipient_user_id, kind, channel, status, sent_at)
  WHERE throttled = 1;

CREATE TABLE throttle_places (
  user_id TEXT NOT NULL,
  kind    TEXT NOT NULL,
  channel TEXT NOT NULL,
  places  TEXT NOT NULL DEFAULT '[]',   -- JSON array of ISO times, oldest first
  PRIMARY KEY (user_id, kind, channel)
) WITHOUT ROWID;
-- A running window's places, each at the window's start (when they were taken is not known).
WITH RECURSIVE series(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM series WHERE i < 1000)
INSERT INTO throttle_places (user_id, kind, channel, places)
SELECT w.user_id, w.kind, w.channel,
  (SELECT json_group_array(place) FROM (SELECT w.window_start AS place FROM series WHERE i <= w.used))
FROM throttle_windows w WHERE w.used > 0;
DROP TABLE throttle_windows;
ALTER TABLE throttle_places RENAME TO throttle_windows;

-- 3. The addresses an erasure removed, as their pseudonyms only (src/erasure/pseudonym.ts): what a
--    provider reports about one of them afterwards — a late bounce, a complaint — is kept under
--    the pseudonym, never the address.
CREATE TABLE erased_addresses (
  pseudonym TEXT PRIMARY KEY,
  erased_at TEXT NOT NULL
) WITHOUT ROWID;
