-- The audit trail: one row per change an operator made, through the API, the CLI or the
-- console. Rows are only ever inserted: the triggers refuse an update or a delete, whoever asks.
CREATE TABLE audit_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at TEXT NOT NULL,
  -- `admin token`, or the e-mail of a Cloudflare Access identity
  actor TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('admin', 'viewer')),
  via TEXT NOT NULL CHECK (via IN ('api', 'cli', 'console')),
  -- e.g. `dead-letter.replay`, `template.save`, `suppression.delete`
  action TEXT NOT NULL,
  -- what it was done to: a dead letter's id, `kind/locale/channel`, a user id, an address
  target TEXT,
  -- the request's parameters (JSON), as the route validated them
  parameters TEXT NOT NULL DEFAULT '{}',
  -- rows the change affected
  affected INTEGER NOT NULL
);

CREATE INDEX audit_log_action ON audit_log (action, id);
CREATE INDEX audit_log_target ON audit_log (target, id);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
  SELECT RAISE(ABORT, 'audit rows are never changed');
END;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
  SELECT RAISE(ABORT, 'audit rows are never deleted');
END;
