-- notifications_event_id (event_id) repeats the first column of the UNIQUE
-- (event_id, recipient_user_id, channel, kind) constraint's index, which serves every
-- lookup by event_id as well. Each index is one more row written per insert (D1 bills
-- rows written, index entries included): dropping it takes one off every notification.
DROP INDEX IF EXISTS notifications_event_id;
