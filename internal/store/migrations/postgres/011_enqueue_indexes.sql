-- outbox schema version 11 (PostgreSQL 12+): pending rows leave the
-- status/topic index. Every enqueued row entered it (its predicate was
-- status <> 'sent'), one index insertion per message on the producer's
-- transaction, yet nothing reads pending rows through it: the pending
-- count and the relay's read walk the pending-rows index, the admin
-- search for pending rows of a topic walks that index newest first, and
-- the counts by status and topic read the whole table. What it serves —
-- the dead count, `outbox dead list`, the admin search of dead or
-- consumed rows by topic — is rows that are dead or consumed. Building it
-- reads the table once and holds back writes meanwhile.
DROP INDEX outbox_messages_status_topic_idx;
CREATE INDEX outbox_messages_status_topic_idx ON outbox_messages (status, topic) WHERE status IN ('dead', 'consumed');
