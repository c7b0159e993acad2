-- outbox schema version 16 (MariaDB 10.6+, MySQL 8+): each relay records a
-- fingerprint of its route table beside its heartbeat. A relay that finds
-- no route for a topic compares its fingerprint with the other live
-- relays': while one of them routes differently (a rolling deploy adds a
-- route), the message waits instead of going dead as "no route". NULL: a
-- relay of an earlier version, whose routes are unknown.
ALTER TABLE outbox_relays ADD COLUMN routes TEXT NULL;
