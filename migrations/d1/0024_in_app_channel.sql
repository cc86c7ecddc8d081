-- notify-edge D1 schema, part 24: the in-app channel (src/inbox/).
--
-- A kind whose event-type module has in-app templates can also reach its recipients' in-app feeds.
-- Its channel policy is written here for every urgency, turned off: a deployment sends what it sent
-- before until an operator turns the channel on for a kind (docs/inbox.md), since each item is a
-- Durable Object request and a feed nobody reads is a cost for nothing.
INSERT OR IGNORE INTO channel_policies (kind, urgency, channel, enabled)
SELECT 'ResponseCreated', urgency.value, 'in-app', 0
FROM json_each('["low","normal","high"]') AS urgency;
