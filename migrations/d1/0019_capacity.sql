-- Capacity (issue 38): what one email leaves behind ages out whole.
--
-- A final notification whose content retention removed (or an erasure) is a stub; the cron deletes
-- stubs once NOTIFICATION_RETENTION_DAYS have passed since their creation (src/notifications/prune.ts),
-- finding the oldest by this index. Only stubs are in it, so a notification that still has its
-- content costs it nothing.
CREATE INDEX notifications_stubs ON notifications (created_at) WHERE content_removed_at IS NOT NULL;

-- A bundle's row (its idempotency key, src/notifications/bundles.ts) ages out with its notifications'
-- rows (NOTIFICATION_RETENTION_DAYS): a week at least, past any provider's idempotency window.
CREATE INDEX send_batches_created ON send_batches (created_at);

-- Indexes no statement needs, each one more row written for every notification (D1 bills every
-- index entry) and bytes kept as long as the row:
-- - the claim token: every statement that names a token names the notification's id too, but for
--   the lease renewal, which finds the `sending` ones by the status index — as many as are in flight.
-- - the idempotency key: the batch context finds an event's notifications by its event id, the first
--   column of their unique key's index.
DROP INDEX notifications_claim;
DROP INDEX notifications_idempotency_key;
