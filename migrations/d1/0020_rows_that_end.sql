-- Capacity (issue 38), continued: what a notification leaves behind goes with its row. (Retention now
-- counts a notification's days from its last change, not its creation: `notifications_stubs` still
-- finds the oldest by creation, which is never later.)

-- A delivery event about a notification leaves with the notification's row (one transaction, found by
-- delivery_events_notification); only the events that matched no notification age out on their own
-- (DELIVERY_EVENT_RETENTION_DAYS), so only they need an index of their age.
DROP INDEX delivery_events_received_at;
CREATE INDEX delivery_events_orphans ON delivery_events (received_at) WHERE notification_id IS NULL;

-- The transport that sent a notification, on its row: the exact message sent (`sent_messages`, where it
-- used to be read from) is no longer kept by default (SENT_MESSAGE_RETENTION_DAYS).
ALTER TABLE notifications ADD COLUMN transport TEXT;
UPDATE notifications SET transport = (SELECT s.transport FROM sent_messages s WHERE s.notification_id = notifications.id)
WHERE id IN (SELECT notification_id FROM sent_messages);

-- The user a suppression is about, on the entry: the notification that caused it ages out while the
-- entry stays, and an erasure by user id must still find an address the person had before.
ALTER TABLE suppressions ADD COLUMN user_id TEXT;
UPDATE suppressions SET user_id = (SELECT n.recipient_user_id FROM notifications n WHERE n.id = suppressions.notification_id)
WHERE notification_id IS NOT NULL AND address NOT LIKE 'hmac:%';
CREATE INDEX suppressions_user ON suppressions (user_id) WHERE user_id IS NOT NULL;
