-- notify-edge D1 schema, part 17: console sessions that end when they are ended.
--
-- The session cookie stays signed (src/console/session.ts) and now names a row here: signing out
-- ends the row, "sign out everyone" ends them all, and a session not used for
-- CONSOLE_SESSION_IDLE_MINUTES is over (each page renews `seen_at`), whatever its cookie says.
-- Before this, a signed-out cookie opened the console until it expired. Retention deletes the rows
-- a day after they ended or went idle (src/maintenance/retention.ts).
CREATE TABLE console_sessions (
  id         TEXT PRIMARY KEY,
  -- The operator as the audit trail names them ("admin token", or an Access e-mail) and the role.
  name       TEXT NOT NULL,
  role       TEXT NOT NULL CHECK (role IN ('admin', 'viewer')),
  created_at TEXT NOT NULL,
  seen_at    TEXT NOT NULL,
  ended_at   TEXT
) WITHOUT ROWID;

-- Retention's search for sessions long over, and "sign out everyone".
CREATE INDEX console_sessions_seen ON console_sessions (seen_at);
