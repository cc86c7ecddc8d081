-- The outbox of the PushOccurrence relay, exactly, plus additive changes only,
-- so that applying this to a database that already holds those tables and rows loses nothing.
-- `npm run migrate:pg` substitutes PG_SCHEMA for data_exchange and PG_CHANNEL for queue_message_log.

CREATE SCHEMA IF NOT EXISTS data_exchange;

-- The PushOccurrence tables, as they were.
CREATE TABLE IF NOT EXISTS data_exchange.message_queue_log (
    message_id UUID PRIMARY KEY,
    transferred BOOLEAN DEFAULT FALSE,
    transfer_time TIMESTAMP
);

CREATE TABLE IF NOT EXISTS data_exchange.message_queue_log_data (
    message_id UUID REFERENCES data_exchange.message_queue_log(message_id),
    message_body BYTEA
);

-- Additive: when a row was written, so the relay claims oldest first. Existing rows get the
-- time of this migration (and are ordered by message_id among themselves).
ALTER TABLE data_exchange.message_queue_log ADD COLUMN IF NOT EXISTS created_at TIMESTAMPTZ NOT NULL DEFAULT now();

-- Additive: the relay's claim reads only untransferred rows, oldest first.
CREATE INDEX IF NOT EXISTS message_queue_log_untransferred
    ON data_exchange.message_queue_log (created_at, message_id)
    WHERE transferred IS NOT TRUE;

-- Additive: the claim looks the body up by message_id.
CREATE INDEX IF NOT EXISTS message_queue_log_data_message_id
    ON data_exchange.message_queue_log_data (message_id);

-- NOTIFY only wakes the relay (the payload is the message id); the rows are the data.
CREATE OR REPLACE FUNCTION data_exchange.notify_queue_message_log() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('queue_message_log', NEW.message_id::text);
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS message_queue_log_notify ON data_exchange.message_queue_log;
CREATE TRIGGER message_queue_log_notify
    AFTER INSERT ON data_exchange.message_queue_log
    FOR EACH ROW EXECUTE FUNCTION data_exchange.notify_queue_message_log();
