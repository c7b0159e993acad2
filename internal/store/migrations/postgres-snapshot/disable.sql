-- Turning the snapshot read off (outbox migrate --read-path table): what
-- enable.sql added goes, once the delivered rows of the snapshot domain
-- are marked sent (DisableSnapshotRead does that first, in the same
-- transaction, with no relay holding a lease). The pending rows left are
-- read by status, as before the step.
DROP TRIGGER IF EXISTS outbox_leave_snapshot ON outbox_messages;
DROP FUNCTION IF EXISTS outbox_leave_snapshot();
DROP FUNCTION IF EXISTS outbox_snapshot_read(text[], text[], text[], bigint[], boolean[], xid8, xid8, int, bigint, bigint[], int[], text, xid8[]);
DROP FUNCTION IF EXISTS outbox_read_retries(int[], int, text, bigint);
DROP FUNCTION IF EXISTS outbox_settle_snapshot(bigint[], text[], bigint[], text[], int[], boolean[], text);
DROP FUNCTION IF EXISTS outbox_snapshot_resume(int[], boolean[], text, int);
DROP FUNCTION IF EXISTS outbox_delivered(smallint, xid8, bigint);
DROP FUNCTION IF EXISTS outbox_snapshot_floor();
DROP FUNCTION IF EXISTS outbox_snapshot_lo(pg_snapshot, bigint);
DROP FUNCTION IF EXISTS outbox_server_boot();
DROP INDEX IF EXISTS outbox_messages_txid_idx;
DROP INDEX IF EXISTS outbox_messages_retry_idx;
ALTER TABLE outbox_messages DROP COLUMN IF EXISTS outbox_txid;
ALTER TABLE outbox_leases DROP COLUMN IF EXISTS snap_lo, DROP COLUMN IF EXISTS snap_hi, DROP COLUMN IF EXISTS snap_after_txid,
    DROP COLUMN IF EXISTS snap_after_id, DROP COLUMN IF EXISTS snap_boot;
