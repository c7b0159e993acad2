-- Undoes version 1: the outbox's tables and every row in them.
DROP TABLE IF EXISTS outbox_inbox;
DROP TABLE IF EXISTS outbox_relays;
DROP TABLE IF EXISTS outbox_leases;
DROP TABLE IF EXISTS outbox_messages;
