-- Undoes version 17: no checks, and UUID() (version 1) as the default
-- message id. Rows the migration changed stay as it left them.
ALTER TABLE outbox_messages
    DROP CONSTRAINT outbox_messages_headers_object,
    DROP CONSTRAINT outbox_messages_topic_length,
    DROP CONSTRAINT outbox_messages_attempts_min,
    DROP CONSTRAINT outbox_messages_max_attempts_min,
    DROP CONSTRAINT outbox_messages_status_known,
    ALTER COLUMN message_id SET DEFAULT (UUID());
