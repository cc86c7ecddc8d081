-- notify-edge D1 schema, part 28: a try taken as not sent, remembered.
--
-- A notification that may have gone out through a transport it had to leave waits for that transport's
-- delivery events (`failover_from`); with none in time it is taken as not sent and goes through the
-- next transport, and its claim clears `failover_from`. `unconfirmed_through` keeps the name of the
-- transport whose try was taken as not sent, for the row's life: a cancellation that ends the
-- notification afterwards says in its reason that an email may have gone out through it all the same,
-- instead of a plain "cancelled" over an email its recipient may hold.
ALTER TABLE notifications ADD COLUMN unconfirmed_through TEXT;
