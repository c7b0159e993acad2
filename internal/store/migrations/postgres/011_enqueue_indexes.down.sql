-- Undoes version 11: the status/topic index holds pending rows again.
DROP INDEX outbox_messages_status_topic_idx;
CREATE INDEX outbox_messages_status_topic_idx ON outbox_messages (status, topic) WHERE status <> 'sent';
