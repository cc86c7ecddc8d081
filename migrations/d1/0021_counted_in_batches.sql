-- Capacity (issue 38), continued: notify_notifications_total counted a batch at a time on the hot path.
--
-- The triggers wrote a counter row for every notification inserted and every status it reached: three
-- of the eighteen rows an email wrote. The statements of the hot path (a planned notification's insert,
-- the claim, the `sent` mark) now write a fresh random `count_mark` on the rows they change and count
-- them themselves, one statement per batch in the same transaction (src/notifications/counted.ts); the
-- triggers count every other change, which leaves `count_mark` as it was, exactly as before.
ALTER TABLE notifications ADD COLUMN count_mark INTEGER;

DROP TRIGGER notifications_count_insert;
CREATE TRIGGER notifications_count_insert AFTER INSERT ON notifications
WHEN NEW.count_mark IS NULL
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_notifications_total', json_object('channel', NEW.channel, 'kind', NEW.kind, 'status', NEW.status), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;

DROP TRIGGER notifications_count_status;
CREATE TRIGGER notifications_count_status AFTER UPDATE OF status ON notifications
WHEN OLD.status <> NEW.status AND NEW.count_mark IS OLD.count_mark
BEGIN
  INSERT INTO counters (name, labels, value)
  VALUES ('notify_notifications_total', json_object('channel', NEW.channel, 'kind', NEW.kind, 'status', NEW.status), 1)
  ON CONFLICT (name, labels) DO UPDATE SET value = value + 1;
END;
