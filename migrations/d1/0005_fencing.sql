-- notify-edge D1 schema, part 5: fenced dispatch and decision times.

-- Who holds (or last held) a notification's dispatch claim. Every claim carries a fresh
-- token; the lease is renewed under it while the send runs, and the sent / failed marks
-- apply only under it, so a delivery that lost its lease can never overwrite the outcome
-- of the one that took over.
ALTER TABLE notifications ADD COLUMN claim_token TEXT;
CREATE INDEX notifications_claim ON notifications (claim_token) WHERE claim_token IS NOT NULL;

-- When the verification decision was made (the event's time), so that a fallback decision
-- that names no request is matched only against the authoritative decision made at about
-- the same moment, never against an older one of the same person.
ALTER TABLE notifications ADD COLUMN decision_at TEXT;
