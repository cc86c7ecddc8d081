-- notify-edge D1 schema, part 27: each email transport's share of the mail, seen at a glance.
--
-- The console's overview and /metrics count the emails each transport sent in the last hour
-- (src/health/providers.ts, `sentLastHour`). The status index holds every sent notification kept, by
-- when it was due, so that count read all of them; this one holds the sent emails by when they were
-- sent, with their transport, so it reads the hour's entries and nothing else. Only sent emails are
-- in it: one entry written when an email is marked sent (and removed with its row), none for any
-- other notification.
CREATE INDEX notifications_sent_email ON notifications (sent_at, transport) WHERE status = 'sent' AND channel = 'email';
