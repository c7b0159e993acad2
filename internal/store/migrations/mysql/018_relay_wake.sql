-- outbox schema version 18 (MariaDB 10.6+, MySQL 8+): each relay records how it learns of
-- new messages between its polls ("probe 25ms", "poll"), for
-- `outbox status`. The wake-up itself needs no schema: the relay
-- probes the table's highest id over its primary key every 25 ms
-- (--probe-interval) and reads only when it changes, which sees rows written by
-- any producer (plain SQL, other languages) without a trigger. NULL: a
-- relay of an earlier version.
ALTER TABLE outbox_relays ADD COLUMN wake VARCHAR(64) NULL;
