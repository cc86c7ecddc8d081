-- notify-edge D1 schema, part 11: when a notification was last claimed for sending.
--
-- A notification's story had its creation, its sending and its delivery, but not the moment a
-- dispatcher took it: `notify-edge smoke` and an operator reading a stall need to tell "never
-- claimed" (the dispatch queue or a pause) from "claimed and the provider is slow". NULL for rows
-- claimed before this column existed, and for rows never claimed.
ALTER TABLE notifications ADD COLUMN claimed_at TEXT;
