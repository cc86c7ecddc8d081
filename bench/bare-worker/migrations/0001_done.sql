-- One row per message a bare consumer finished.
CREATE TABLE done (id TEXT PRIMARY KEY, queue TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX done_queue ON done (queue);
