-- notify-edge D1 schema, part 26: provider failover.
--
-- `notifications.transport` now names the transport of a notification's latest try, written when it is
-- claimed (before: only once sent), so a try that may have gone out is tried again only through the
-- same provider, and a lease that ran out is judged by that provider's rules.
-- `failover_from`: the transport a notification that may have gone out through it waits to leave
-- (that transport is paused or its circuit open): with no delivery event from it in time, the
-- notification goes through the next transport. Its next claim clears it: a later wait is that try's own.
ALTER TABLE notifications ADD COLUMN failover_from TEXT;

-- Consecutive failures of a transport that say the provider may be down (a 5xx, no answer): at
-- CIRCUIT_FAILURES its circuit opens, as a pause with the code `circuit-open` (transport_pauses), and
-- an accepted send through it clears the count. One row per transport, in each D1 shard.
CREATE TABLE transport_failures (
  transport  TEXT PRIMARY KEY,
  failures   INTEGER NOT NULL,
  since      TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
