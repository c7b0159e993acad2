-- outbox schema version 2 (SQLite): what operators changed through the
-- admin API and the command line.
CREATE TABLE outbox_audit (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    count  INTEGER NOT NULL DEFAULT 0
);
