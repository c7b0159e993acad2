-- outbox schema version 18 (SQLite 3.35+): each relay records how it learns of
-- new messages between its polls ("watch", "probe 25ms", "poll"), for
-- `outbox status`. The wake-up itself needs no schema: the relay watches
-- the database file and its write-ahead log (on Linux; elsewhere it
-- probes every 25 ms) and, when they change, probes the table's highest
-- id over its primary key, reading only when it moved: rows written by
-- any producer (plain SQL, other languages) wake it without a trigger.
-- NULL: a relay of an earlier version.
ALTER TABLE outbox_relays ADD COLUMN wake VARCHAR(64) NULL;
