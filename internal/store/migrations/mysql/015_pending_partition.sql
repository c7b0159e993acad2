-- outbox schema version 15 (MariaDB 10.6+, MySQL 8+): the pending-rows
-- index also holds each row's partition. A relay's workers read their
-- partitions' pending rows by walking this index in id order and testing
-- each row's partition; with the partition in the index the test is made
-- on the index entry, and only the rows of the worker's own partitions
-- are looked up. Before, every row on the way was: with four workers,
-- about seven rows read for each one delivered.
ALTER TABLE outbox_messages
    DROP INDEX outbox_messages_pending_idx,
    ADD INDEX outbox_messages_pending_idx (status, id, partition_no);
