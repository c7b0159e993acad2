-- Undoes version 1 of the partitioned layout: the outbox's tables, every
-- partition and row in them, and the functions that manage partitions.
DROP TABLE IF EXISTS outbox_inbox;
DROP TABLE IF EXISTS outbox_relays;
DROP TABLE IF EXISTS outbox_leases;
DROP TABLE IF EXISTS outbox_messages;
DROP FUNCTION IF EXISTS outbox_messages_drop_partition(text, text, integer);
DROP FUNCTION IF EXISTS outbox_messages_add_partitions(date, date, integer);
DROP FUNCTION IF EXISTS outbox_uuid_v7_floor(date);
DROP FUNCTION IF EXISTS outbox_uuid_v7();
