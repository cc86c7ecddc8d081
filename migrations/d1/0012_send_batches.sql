-- notify-edge D1 schema, part 12: batched sends.
--
-- Resend takes up to 100 emails in one `POST /emails/batch` under one Idempotency-Key. For a
-- retry to be safe, the batch must be the same every time it is sent: the same members in the
-- same order, so the same payload under the same key, which Resend then answers with its first
-- answer instead of sending again. So the membership is decided once and written here before
-- the first request, and a notification in a batch is only ever sent with its batch.
CREATE TABLE send_batches (
  -- The Idempotency-Key of every request for the batch.
  id          TEXT PRIMARY KEY,
  transport   TEXT NOT NULL,
  size        INTEGER NOT NULL CHECK (size BETWEEN 2 AND 100),
  created_at  TEXT NOT NULL
);

-- The batch a notification belongs to and its place in it; NULL for one sent alone. A batch that
-- Resend refused as a whole (nothing was sent under its key) lets its members go: they lose both,
-- and `send_alone` keeps one that was in a batch Resend found invalid from joining another, so
-- the one email at fault fails by itself instead of taking a hundred with it.
ALTER TABLE notifications ADD COLUMN batch_id TEXT;
ALTER TABLE notifications ADD COLUMN batch_position INTEGER;
ALTER TABLE notifications ADD COLUMN send_alone INTEGER NOT NULL DEFAULT 0;
CREATE INDEX notifications_batch ON notifications (batch_id, batch_position) WHERE batch_id IS NOT NULL;
