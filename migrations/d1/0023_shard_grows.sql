-- Growing the D1 shards (src/shards/grow.ts). In the primary, a grow's row records when the first call saw
-- the hold (a consumer or cron invocation from before it may still be writing for up to 15 minutes) and
-- where the grow is, so that a restarted `notify-edge shards grow` goes on from there. In each old shard,
-- the row records that its counters were handed over to its new shard: the rows the move inserted were
-- counted again by the new shard's triggers, so the old shard counts that much less, once.
CREATE TABLE shard_grows (
  to_count    INTEGER PRIMARY KEY,
  held_at     TEXT,
  cursor      TEXT,
  finished_at TEXT
);
