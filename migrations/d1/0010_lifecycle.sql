-- notify-edge D1 schema, part 10: a data lifecycle — retention and erasure.
--
-- Until now nothing but processed-event keys was ever deleted, so the database grew until D1's
-- size limit, where every write fails. The cron now prunes each kind of data after its own
-- retention, a bounded chunk per run, and an operator can erase a recipient. Every statement here
-- also runs on a database that already holds data: columns are added (NULL for existing rows),
-- indexes are built over what is there, existing resolved dead letters get a resolution time.

-- A notification whose content was removed keeps its row (ids, kind, status, times) for stories
-- and counts; these say when and why its recipient snapshot, subject and bodies went.
ALTER TABLE notifications ADD COLUMN content_removed_at TEXT;
ALTER TABLE notifications ADD COLUMN content_removed_by TEXT CHECK (content_removed_by IN ('retention', 'erasure'));
-- The keyed pseudonym of the recipient's address (`hmac:` + hex HMAC-SHA256 of the lower-cased
-- address), written with the row, so that the suppression gate matches an erased address, whose
-- suppression keeps only this form. NULL for rows written before: their addresses are in clear.
ALTER TABLE notifications ADD COLUMN recipient_hash TEXT;
-- Retention's search: the oldest notifications whose content is still there. Partial, so that a
-- pruned row leaves the index and the index holds about one retention period of rows.
CREATE INDEX notifications_unpruned ON notifications (created_at) WHERE content_removed_at IS NULL;

-- Retention's search for raw MIME and delivery events, oldest first (both tables are keyed by
-- something else, and raw MIME sits before sent_at in the row: a scan would read every message).
CREATE INDEX sent_messages_sent_at ON sent_messages (sent_at);
CREATE INDEX delivery_events_received_at ON delivery_events (received_at);

-- When a dead letter was replayed or discarded: a resolved dead letter is kept for its retention
-- from then, not from when it failed. Rows resolved before this migration count from their replay,
-- else from their last failure. (Setting resolved_at fires none of the counting triggers: they
-- watch status and code only.)
ALTER TABLE dead_letters ADD COLUMN resolved_at TEXT;
UPDATE dead_letters SET resolved_at = coalesce(replayed_at, last_seen) WHERE status <> 'open';
CREATE INDEX dead_letters_resolved ON dead_letters (resolved_at) WHERE status <> 'open';

-- The audit trail keeps its promise — no row is changed or deleted by anyone — with two exceptions
-- that the triggers themselves spell out, so that no code path can widen them:
--   * retention deletes rows older than AUDIT_RETENTION_DAYS (at least 365). The trigger refuses
--     the delete of any row younger than 364 days, whoever asks; the day between the two absorbs
--     a clock difference between the Worker and the database.
--   * an erasure replaces a target that is an address by that address's pseudonym (`hmac:…`),
--     changing nothing else of the row.
CREATE INDEX audit_log_at ON audit_log (at);

DROP TRIGGER audit_log_no_delete;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN OLD.at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-364 days')
BEGIN
  SELECT RAISE(ABORT, 'audit rows are never deleted before retention ends (364 days at least)');
END;

DROP TRIGGER audit_log_no_update;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
WHEN NOT (OLD.target LIKE '%@%' AND NEW.target LIKE 'hmac:%'
          AND NEW.id = OLD.id AND NEW.at = OLD.at AND NEW.actor = OLD.actor AND NEW.role = OLD.role
          AND NEW.via = OLD.via AND NEW.action = OLD.action AND NEW.parameters = OLD.parameters
          AND NEW.affected = OLD.affected)
BEGIN
  SELECT RAISE(ABORT, 'audit rows are never changed, but for an erased address that becomes its pseudonym');
END;
