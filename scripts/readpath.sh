#!/usr/bin/env bash
# Measures, on PostgreSQL, what a read path costs the database per
# delivered message, for today's path and for the two designs that write
# nothing per message (docs/design.md, "A read path that writes nothing per
# message"), on a private server of its own (initdb: wal_level = logical,
# pg_stat_statements, autovacuum off, fsync on):
#
#   table     today's relay: `outbox bench steady` (read and mark, publish
#             to NATS, settle), its backends' CPU from the bench's report;
#   logical   a logical replication slot with pgoutput on a publication of
#             outbox_messages inserts, consumed by pg_recvlogical: the
#             walsender's CPU (the decoding, which is all the database
#             does; the relay would confirm positions over the same
#             connection);
#   snapshot  batches cut by transaction snapshots: a column with the
#             writing transaction's id (default pg_current_xact_id()),
#             its index, a cursor row holding the last batch's snapshot,
#             and a reader calling outbox_snapshot_round() ROUNDS times a
#             second (the rounds the table run made): the reader's
#             backend CPU;
#   held      the same batches with the last snapshot held by the reader
#             (outbox_snapshot_read(prev)): no write a round.
#
# Producers write RATE one-message transactions a second (pgbench, 16
# clients, 1,000 keys, 500 B) for SECONDS_RUN; each run in a fresh database,
# the four alternated REPS times (with the WAL written per message: what
# a slot holds while no relay reads). Then a backlog of BACKLOG messages
# read in one go by each (the drain's database side), and the producers'
# insert with and without the snapshot column and its index, alternated
# REPS times.
#
#   scripts/readpath.sh                       # RATE=1000 SECONDS_RUN=20 REPS=3
#   RATE=1000 ROUNDS=50 scripts/readpath.sh   # snapshot rounds fixed
#
# Needs initdb, pgbench, pg_recvlogical (PostgreSQL 15 or later), jq, NATS
# on $NATS (scripts/services.sh nats) and a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-1000}
SECONDS_=${SECONDS_RUN:-20}
REPS=${REPS:-3}
BACKLOG=${BACKLOG:-48000}
PORT=${PORT:-55440}
NATS=${NATS:-nats://127.0.0.1:4222}
BIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
export PATH="$BIN:$PATH"
for c in initdb pg_ctl pgbench pg_recvlogical psql jq; do
  command -v "$c" >/dev/null || { echo "readpath.sh: $c is needed" >&2; exit 2; }
done
TICK=$(getconf CLK_TCK)

DIR=$(mktemp -d /tmp/outbox-readpath.XXXXXX)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$DIR"
as_pg initdb -D "$DIR/data" -A trust -U postgres -E UTF8 >/dev/null
as_pg pg_ctl start -D "$DIR/data" -w -l "$DIR/log" -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 \
  -c max_connections=300 -c wal_level=logical -c max_replication_slots=4 -c max_wal_senders=4 \
  -c shared_preload_libraries=pg_stat_statements -c autovacuum=off -c shared_buffers=512MB" >/dev/null
trap 'as_pg pg_ctl stop -D "$DIR/data" -m immediate >/dev/null 2>&1; rm -rf "$DIR"' EXIT

go build -o "$DIR/outbox" ./cmd/outbox
URL="postgres://postgres@127.0.0.1:$PORT"
psql_() { local db=$1; shift; PGOPTIONS='-c client_min_messages=warning' psql -X -qAt -h 127.0.0.1 -p "$PORT" -U postgres -d "$db" -v ON_ERROR_STOP=1 "$@"; }
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
# us_per CPU_TICKS MESSAGES: microseconds of CPU per message.
us_per() { echo $(( $1 * 1000000 / TICK / $2 )); }

cat > "$DIR/insert.sql" <<'EOF'
\set k random(1, 1000)
INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('readpath', 'key-' || :k, repeat('x', 500));
EOF
echo 'SELECT count(*) FROM outbox_snapshot_round();' > "$DIR/round.sql"
# The same batch with the last snapshot held by the reader (persisted,
# say, once a second: a crash replays at most that much, which
# at-least-once allows): one call a round, no write.
printf 'SELECT cur AS prev, batch FROM outbox_snapshot_read(:prev::pg_snapshot)\n\\gset\n' > "$DIR/read.sql"

# fresh NAME [snapshot]: a new database with the outbox schema (and the
# snapshot path's column, index, cursor and round function).
fresh() {
  psql_ postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"
  "$DIR/outbox" migrate --db "$URL/$1?sslmode=disable" >/dev/null
  if [ "${2:-}" = snapshot ]; then
    psql_ "$1" <<'EOF'
ALTER TABLE outbox_messages ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX outbox_messages_txid_idx ON outbox_messages (txid);
CREATE TABLE outbox_snapshot_cursor (id int PRIMARY KEY, prev pg_snapshot NOT NULL);
INSERT INTO outbox_snapshot_cursor VALUES (1, pg_current_snapshot());
-- One batch: the rows whose transaction is visible in this round's
-- snapshot and was not in the last one's; the cursor moves to this one.
-- The plans are generic and kept (prepared, as the relay's statements
-- are), on the index of the column: planning such a read for each round
-- would cost more than running it.
CREATE FUNCTION outbox_snapshot_round() RETURNS TABLE (id bigint, message_id text, topic varchar,
  business_key varchar, payload text, headers jsonb, partition_no smallint)
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE prev pg_snapshot; cur pg_snapshot := pg_current_snapshot();
BEGIN
  SELECT c.prev INTO prev FROM outbox_snapshot_cursor c WHERE c.id = 1 FOR UPDATE;
  UPDATE outbox_snapshot_cursor SET prev = cur WHERE outbox_snapshot_cursor.id = 1;
  RETURN QUERY SELECT m.id, m.message_id::text, m.topic, m.business_key, m.payload, m.headers, m.partition_no
    FROM outbox_messages m
   WHERE m.txid >= pg_snapshot_xmin(prev) AND m.txid < pg_snapshot_xmax(cur)
     AND pg_visible_in_snapshot(m.txid, cur) AND NOT pg_visible_in_snapshot(m.txid, prev)
   ORDER BY m.txid, m.id;
END $$;
-- The same batch with the last snapshot held by the reader: the batch
-- comes back as one value beside the snapshot it was cut by.
CREATE FUNCTION outbox_snapshot_read(prev pg_snapshot, OUT cur text, OUT batch text)
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE s pg_snapshot := pg_current_snapshot();
BEGIN
  cur := s::text;
  SELECT string_agg(m.id || m.message_id::text || m.topic || coalesce(m.business_key, '') || m.payload || m.headers::text, '' ORDER BY m.txid, m.id)
    INTO batch
    FROM outbox_messages m
   WHERE m.txid >= pg_snapshot_xmin(prev) AND m.txid < pg_snapshot_xmax(s)
     AND pg_visible_in_snapshot(m.txid, s) AND NOT pg_visible_in_snapshot(m.txid, prev);
END $$;
EOF
  fi
}

# produce DB: RATE one-message transactions a second for SECONDS_.
produce() { pgbench -n -h 127.0.0.1 -p "$PORT" -U postgres -c 16 -j 2 -R "$RATE" -T "$SECONDS_" -f "$DIR/insert.sql" "$1" >/dev/null 2>&1; }
count() { psql_ "$1" -c "SELECT count(*) FROM outbox_messages"; }
lsn() { psql_ "$1" -c "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"; }

ROUNDS_SEEN=${ROUNDS:-100}
run_table() {
  fresh rp_table
  local j
  j=$("$DIR/outbox" bench steady --db "$URL/rp_table?sslmode=disable" --rate "$RATE" --duration "${SECONDS_}s" --to "$NATS" --json 2>/dev/null)
  local rounds secs
  rounds=$(jq '.steady.batches.rounds' <<<"$j")
  [ -z "${ROUNDS:-}" ] && [ "$rounds" -gt 0 ] && ROUNDS_SEEN=$(( rounds / (SECONDS_ + 2) ))  # the bench warms up 2 s
  echo "table     $(jq -r '.steady | "relay database CPU \(.relay_db_cores / .achieved_rate * 1e6 | floor) µs/msg; \(.batches.rounds) rounds of \(.batches.mean_read * 10 | floor / 10) msg; \(.achieved_rate | floor) msg/s reached"' <<<"$j")"
}
run_logical() {
  fresh rp_logical
  psql_ rp_logical -c "CREATE PUBLICATION outbox_feed FOR TABLE outbox_messages WITH (publish = 'insert')"
  pg_recvlogical -h 127.0.0.1 -p "$PORT" -U postgres -d rp_logical --slot rp --create-slot -P pgoutput
  pg_recvlogical -h 127.0.0.1 -p "$PORT" -U postgres -d rp_logical --slot rp --start \
    -o proto_version=1 -o publication_names=outbox_feed -f /dev/null &
  local rl=$! ws
  sleep 1
  ws=$(psql_ rp_logical -c "SELECT pid FROM pg_stat_replication WHERE application_name = 'pg_recvlogical'")
  local n0 w0 l0 n1 w1 l1
  n0=$(count rp_logical); w0=$(cpu "$ws"); l0=$(lsn rp_logical)
  produce rp_logical
  sleep 1
  n1=$(count rp_logical); w1=$(cpu "$ws"); l1=$(lsn rp_logical)
  kill "$rl"; wait "$rl" 2>/dev/null || true
  psql_ rp_logical -c "SELECT pg_drop_replication_slot('rp')" >/dev/null
  echo "logical   walsender CPU $(us_per $((w1 - w0)) $((n1 - n0))) µs/msg; WAL $(( (l1 - l0) / (n1 - n0) )) B/msg; $((n1 - n0)) messages"
}
# run_reader KIND: a fresh snapshot database, one reader taking a batch
# ROUNDS_SEEN times a second while the producers write: the reader's
# backend CPU per message. KIND round writes the cursor row each round;
# held passes the last snapshot from one round to the next.
run_reader() {
  fresh rp_snapshot snapshot
  local script=round.sql label="snapshot " note=""
  local args=()
  if [ "$1" = held ]; then
    script=read.sql label="held     " note=" (snapshot, cursor in the reader)"
    args=(-D "prev=$(psql_ rp_snapshot -c "SELECT pg_current_snapshot()")")
  fi
  PGAPPNAME=readpath-reader pgbench -n -M prepared "${args[@]}" -h 127.0.0.1 -p "$PORT" -U postgres -c 1 -R "$ROUNDS_SEEN" \
    -T $((SECONDS_ + 2)) -f "$DIR/$script" rp_snapshot > "$DIR/reader.out" 2>&1 &
  local rb=$! rp
  sleep 0.5
  rp=$(psql_ rp_snapshot -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'readpath-reader'")
  local n0 c0 n1 c1
  n0=$(count rp_snapshot); c0=$(cpu "$rp")
  produce rp_snapshot
  n1=$(count rp_snapshot); c1=$(cpu "$rp")
  wait "$rb"
  echo "$label reader CPU $(us_per $((c1 - c0)) $((n1 - n0))) µs/msg; $ROUNDS_SEEN rounds/s, $((n1 - n0)) messages$note"
}

echo "## $RATE msg/s for ${SECONDS_}s, alternated ($REPS times)"
for i in $(seq "$REPS"); do run_table; run_logical; run_reader round; run_reader held; done

echo "## a backlog of $BACKLOG one-message transactions, read in one go"
backlog() { pgbench -n -h 127.0.0.1 -p "$PORT" -U postgres -c 16 -j 2 -t $((BACKLOG / 16)) -f "$DIR/insert.sql" "$1" >/dev/null 2>&1; }
fresh rp_table
echo "table     $("$DIR/outbox" bench ceiling --db "$URL/rp_table?sslmode=disable" --messages "$BACKLOG" --json 2>/dev/null | jq -r '.ceiling | "read and settle, no publish: \(.messages_per_second | floor) msg/s; postgres CPU \(.machine.server_cores.postgres * .machine.seconds / .messages * 1e6 | floor) µs/msg"')"
fresh rp_logical
psql_ rp_logical -c "CREATE PUBLICATION outbox_feed FOR TABLE outbox_messages WITH (publish = 'insert')"
pg_recvlogical -h 127.0.0.1 -p "$PORT" -U postgres -d rp_logical --slot rp --create-slot -P pgoutput
backlog rp_logical
END=$(psql_ rp_logical -c "SELECT pg_current_wal_lsn()")
s=$(date +%s%N)
pg_recvlogical -h 127.0.0.1 -p "$PORT" -U postgres -d rp_logical --slot rp --start -E "$END" \
  -o proto_version=1 -o publication_names=outbox_feed -f /dev/null &
rl=$!
ws=""; while [ -z "$ws" ]; do ws=$(psql_ rp_logical -c "SELECT pid FROM pg_stat_replication WHERE application_name = 'pg_recvlogical'"); done
# The walsender is this connection's own process: its CPU from its start
# is the decoding's, read until it exits.
w1=0
while kill -0 "$rl" 2>/dev/null; do w1=$(cpu "$ws" 2>/dev/null || echo "$w1"); sleep 0.02; done
e=$(date +%s%N)
echo "logical   decoded $BACKLOG in $(( (e - s) / 1000000 )) ms ($(( BACKLOG * 1000000000 / (e - s) )) msg/s); walsender CPU $(us_per "$w1" "$BACKLOG") µs/msg"
psql_ rp_logical -c "SELECT pg_drop_replication_slot('rp')" >/dev/null
fresh rp_snapshot snapshot
psql_ rp_snapshot -c "UPDATE outbox_snapshot_cursor SET prev = pg_current_snapshot()"
backlog rp_snapshot
psql_ rp_snapshot -c "ANALYZE outbox_messages"
t=$(psql_ rp_snapshot -c '\timing on' -c "SELECT count(*) FROM outbox_snapshot_round()" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
echo "snapshot  read $BACKLOG rows in one round: $t ms"

echo "## snapshot batches with commits out of order: each row read once"
# Producers hold each transaction open 0–20 ms after its insert, so rows
# with lower transaction ids commit after higher ones; the reader records
# every id it reads.
fresh rp_check snapshot
psql_ rp_check <<'EOF'
CREATE TABLE seen (id bigint NOT NULL, txid xid8 NOT NULL, round bigint NOT NULL);
CREATE SEQUENCE seen_round;
CREATE FUNCTION outbox_snapshot_check(prev pg_snapshot, OUT cur text)
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE s pg_snapshot := pg_current_snapshot(); r bigint := nextval('seen_round');
BEGIN
  cur := s::text;
  INSERT INTO seen SELECT m.id, m.txid, r FROM outbox_messages m
   WHERE m.txid >= pg_snapshot_xmin(prev) AND m.txid < pg_snapshot_xmax(s)
     AND pg_visible_in_snapshot(m.txid, s) AND NOT pg_visible_in_snapshot(m.txid, prev);
END $$;
EOF
cat > "$DIR/late.sql" <<'EOF'
\set k random(1, 1000)
\set d random(0, 20000)
BEGIN;
INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('readpath', 'key-' || :k, repeat('x', 500));
\sleep :d us
COMMIT;
EOF
printf 'SELECT cur AS prev FROM outbox_snapshot_check(:prev::pg_snapshot)\n\\gset\n' > "$DIR/check.sql"
start=$(psql_ rp_check -c "SELECT pg_current_snapshot()")
pgbench -n -M prepared -D "prev=$start" -h 127.0.0.1 -p "$PORT" -U postgres -c 1 -R 100 -T 13 -f "$DIR/check.sql" rp_check >/dev/null 2>&1 &
reader=$!
pgbench -n -h 127.0.0.1 -p "$PORT" -U postgres -c 16 -j 2 -R 500 -T 10 -f "$DIR/late.sql" rp_check >/dev/null 2>&1
wait "$reader"
echo "snapshot  $(psql_ rp_check -F ' ' -c "SELECT (SELECT count(*) FROM outbox_messages) || ' rows written, ' ||
  (SELECT count(DISTINCT id) FROM seen) || ' read, ' ||
  (SELECT count(*) FROM outbox_messages m WHERE NOT EXISTS (SELECT 1 FROM seen s WHERE s.id = m.id)) || ' never read, ' ||
  (SELECT count(*) - count(DISTINCT id) FROM seen) || ' read twice; ' ||
  (WITH per AS (SELECT round, max(txid) AS top FROM seen GROUP BY round),
        upto AS (SELECT round, max(top) OVER (ORDER BY round ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM per)
   SELECT count(*) FROM seen JOIN upto USING (round) WHERE seen.txid < upto.before) ||
  ' read after a row of a later transaction (a cursor on the transaction id would have skipped them)'")"

echo "## the producers' insert, 16 clients, as fast as they go (15 s each, alternated)"
insert_rate() { pgbench -n -h 127.0.0.1 -p "$PORT" -U postgres -c 16 -j 2 -T 15 -f "$DIR/insert.sql" "$1" 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p'; }
for i in $(seq "$REPS"); do
  fresh rp_table; echo "table     $(insert_rate rp_table) tx/s"
  fresh rp_snapshot snapshot; echo "snapshot  $(insert_rate rp_snapshot) tx/s (transaction id column and its index)"
done
