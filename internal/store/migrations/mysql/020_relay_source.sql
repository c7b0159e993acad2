-- outbox schema version 20: a relay of an adopted table (outbox relay
-- --adopt) registers in outbox_relays too, with the table it serves in
-- source, so that `outbox status --adopt PROFILE`, the admin API and the
-- web page list it with its wake-up. NULL: a relay of outbox_messages.
-- The relays of outbox_messages count only each other when they decide
-- whether another live relay routes a topic.
ALTER TABLE outbox_relays ADD COLUMN source VARCHAR(255) NULL;
