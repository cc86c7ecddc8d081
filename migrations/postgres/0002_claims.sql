-- Leases for the relay (additive only). A bridge claims rows by writing its claim token and an
-- expiry in one short statement, forwards them with no transaction open, then marks them
-- transferred in another short statement that checks the token. A claim whose expiry has
-- passed (its bridge died) is anyone's to take. Nothing here holds a transaction open while
-- the Worker is slow or down, so `idle_in_transaction_session_timeout` and vacuum are unaffected.

ALTER TABLE data_exchange.message_queue_log ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE data_exchange.message_queue_log ADD COLUMN IF NOT EXISTS claimed_until TIMESTAMPTZ;

-- How the row reached the Worker: 'event' (as itself) or 'marker:<kind>' (a marker in its
-- place; the Worker dead-lettered it and the original stays here, in this row's data).
ALTER TABLE data_exchange.message_queue_log ADD COLUMN IF NOT EXISTS forwarded_as TEXT;
