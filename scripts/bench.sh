#!/usr/bin/env bash
# Runs the benchmark suite behind BENCHMARKS.md and prints its results
# table (Markdown) on stdout. Every run's JSON report, and the steady
# runs' SVG plots, land in $OUT (default ./bench-results).
#
#   scripts/bench.sh            # the whole suite, ~30 minutes
#   QUICK=1 scripts/bench.sh    # a tenth of the sizes, to try the script
#
# Needs the local services (scripts/services.sh starts them) and jq. Run it
# on a quiet machine: anything else using the CPUs lowers every figure.
set -euo pipefail
cd "$(dirname "$0")/.."

PG=${OUTBOX_BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}
MY=${OUTBOX_BENCH_MYSQL:-mysql://root@127.0.0.1:3306/test}
SQ=${OUTBOX_BENCH_SQLITE:-sqlite:///tmp/outbox-bench.db}
NATS=${OUTBOX_BENCH_NATS:-nats://127.0.0.1:4222}
OUT=${OUT:-bench-results}
N=100000
SENT=1000000
DUR=30s
WINDOW=30s
if [ -n "${QUICK:-}" ]; then N=10000; SENT=100000; DUR=5s; WINDOW=5s; fi

command -v jq >/dev/null || { echo "bench.sh: jq is needed (apt-get install jq)" >&2; exit 2; }
scripts/services.sh postgres mariadb nats >&2
mkdir -p "$OUT"
go build -o "$OUT/outbox" ./cmd/outbox

# vacuum: each run starts from a vacuumed table, as autovacuum would leave
# it (a test machine may run PostgreSQL with autovacuum off; the relay
# warns about that).
vacuum() {
  if command -v psql >/dev/null; then
    psql "$PG" -qc 'VACUUM ANALYZE outbox_messages' >&2 || true
  fi
}

# run NAME ARGS…: one bench run, its JSON report saved as $OUT/NAME.json.
run() {
  local name=$1; shift
  vacuum
  echo "bench.sh: $name: outbox bench $*" >&2
  "$OUT/outbox" bench "$@" --json >"$OUT/$name.json"
}

for db in pg my sq; do
  case $db in pg) url=$PG ;; my) url=$MY ;; sq) url=$SQ ;; esac
  run "$db-ceiling" ceiling --db "$url" --messages $N
  run "$db-drain-null" drain --db "$url" --messages $N
  run "$db-drain-nats" drain --db "$url" --messages $N --to "$NATS"
  run "$db-steady-1000" steady --db "$url" --rate 1000 --duration $DUR --to "$NATS" --consume --plot "$OUT/$db-steady-1000.svg"
  run "$db-drain-nats-sent-rows" drain --db "$url" --messages $N --to "$NATS" --sent-rows $SENT
  # SQLite has one partition: a second relay would own nothing.
  if [ $db != sq ]; then
    run "$db-drain-nats-2-relays" drain --db "$url" --messages $N --to "$NATS" --relays 2
  fi
  run "$db-produce" produce --db "$url" --clients 1,16,64 --duration 5s
done
run pg-steady-5000 steady --db "$PG" --rate 5000 --duration $DUR --to "$NATS" --consume --plot "$OUT/pg-steady-5000.svg"
run pg-steady-100 steady --db "$PG" --rate 100 --duration $DUR --to "$NATS" --consume
# Few keys: the same drain with 16, 4 and 1 business keys (1,000 above).
KEYS="16 4 1"
for k in $KEYS; do
  run "pg-drain-nats-keys-$k" drain --db "$PG" --messages $N --to "$NATS" --keys "$k"
done
# Key runs: Kafka (an in-process kfake) takes a key's run in one call.
for k in 1000 16 1; do
  run "pg-drain-kfake-keys-$k" drain --db "$PG" --messages $N --to kfake:// --keys "$k"
done
run publish-nats publish --to "$NATS" --messages $N
# The highest rate producers can commit at with the relay keeping up
# (about 5 minutes each; QUICK=1 shortens every trial's window).
for db in pg my; do
  case $db in pg) url=$PG ;; my) url=$MY ;; esac
  run "$db-sustain-nats" sustain --db "$url" --to "$NATS" --window $WINDOW
done
rm -f /tmp/outbox-bench.db /tmp/outbox-bench.db-wal /tmp/outbox-bench.db-shm

# The table.
f() { jq -r "$2" "$OUT/$1.json"; }
rate() { f "$1" '(.drain // .ceiling // .publish).messages_per_second | floor'; }
steady() { f "$1" '.steady | "\(.achieved_rate | floor) msg/s achieved; commit→confirm p50 \(.commit_to_confirm_ms.p50) ms, p99 \(.commit_to_confirm_ms.p99) ms, p99.9 \(.commit_to_confirm_ms.p99_9) ms; intended→confirm p99 \(.latency_ms.p99) ms; commit→receipt p99 \(.commit_to_receipt_ms.p99 // "—") ms; backlog at end \(.backlog_at_end)"'; }
echo "| workload | database | destination | result |"
echo "|---|---|---|---|"
for db in pg my sq; do
  case $db in pg) name=PostgreSQL ;; my) name=MariaDB ;; sq) name=SQLite ;; esac
  echo "| ceiling (read + settle, no publish) | $name | — | $(rate $db-ceiling) msg/s |"
  echo "| drain $N | $name | null | $(rate $db-drain-null) msg/s |"
  echo "| drain $N | $name | NATS JetStream | $(rate $db-drain-nats) msg/s ($(jq -n "$(rate $db-drain-nats) / $(rate $db-ceiling) * 100 | floor")% of ceiling) |"
  echo "| steady 1,000 msg/s | $name | NATS JetStream | $(steady $db-steady-1000) |"
  echo "| drain $N with $SENT sent rows in the table | $name | NATS JetStream | $(rate $db-drain-nats-sent-rows) msg/s ($(jq -n "$(rate $db-drain-nats-sent-rows) / $(rate $db-drain-nats) * 100 | floor")% of the empty table's) |"
  if [ $db != sq ]; then
    echo "| drain $N, 2 relays | $name | NATS JetStream | $(rate $db-drain-nats-2-relays) msg/s ($(jq -n "$(rate $db-drain-nats-2-relays) / $(rate $db-drain-nats) * 100 | floor")% of one relay's) |"
  fi
  echo "| produce (business tx + enqueue vs business tx alone) | $name | — | $(f $db-produce '[.produce.runs[] | "\(.clients) clients \(.outbox_vs_business * 100 | floor)%"] | join(", ")') |"
done
echo "| steady 5,000 msg/s | PostgreSQL | NATS JetStream | $(steady pg-steady-5000) |"
for db in pg my; do
  case $db in pg) name=PostgreSQL ;; my) name=MariaDB ;; esac
  echo "| sustainable rate | $name | NATS JetStream | $(f $db-sustain-nats '.sustain | "\(.sustained_rate) msg/s (bound: \(.bound)); commit→confirm p50 \(.commit_to_confirm_ms.p50) ms, p99 \(.commit_to_confirm_ms.p99) ms"') |"
done
echo "| publish only (no database) | — | NATS JetStream | $(rate publish-nats) msg/s |"

# Where the CPU went: average cores busy over each timed part, and the CPU
# time per message (per transaction for produce) of each local process.
cpu_cols='"\(.r | floor) | \(.m.busy_cores * 100 | floor / 100) of \(.m.cores) | \((.m.server_cores.postgres // 0) * 1e6 / .r | floor) | \((.m.server_cores["nats-server"] // 0) * 1e6 / .r | floor) | \(.m.bench_cores * 1e6 / .r | floor) | \(.m.busy_cores * 1e6 / .r | floor) |"'
cpu() { f "$1" "(.drain // .ceiling // .publish // .steady) | {r: (.messages_per_second // .achieved_rate), m: .machine} | $cpu_cols"; }
echo
echo "| workload (PostgreSQL) | msg/s | cores busy | postgres µs/msg | nats-server µs/msg | relay (bench) µs/msg | all µs/msg |"
echo "|---|---|---|---|---|---|---|"
echo "| ceiling | $(cpu pg-ceiling)"
echo "| drain, null destination | $(cpu pg-drain-null)"
echo "| drain → NATS | $(cpu pg-drain-nats)"
echo "| drain → NATS, 2 relays | $(cpu pg-drain-nats-2-relays)"
echo "| publish only → NATS (no database) | $(cpu publish-nats)"
echo "| steady 1,000 → NATS | $(cpu pg-steady-1000)"
echo "| steady 5,000 → NATS | $(cpu pg-steady-5000)"
for v in business outbox; do
  echo "| produce, 16 clients, $v (per transaction) | $(f pg-produce ".produce.runs[] | select(.clients == 16) | .variants[] | select(.variant == \"$v\") | {r: .tx_per_second, m: .machine} | $cpu_cols")"
done

# Per-key order with few keys: the drain by number of keys.
echo
echo "| drain → NATS (PostgreSQL), keys | msg/s | vs 1,000 keys |"
echo "|---|---|---|"
echo "| 1000 | $(rate pg-drain-nats) | 1.00 |"
for k in $KEYS; do
  echo "| $k | $(rate pg-drain-nats-keys-$k) | $(jq -n "$(rate pg-drain-nats-keys-$k) / $(rate pg-drain-nats) * 100 | floor / 100") |"
done
echo
echo "| drain → Kafka (kfake, in process; PostgreSQL), keys | msg/s | vs 1,000 keys |"
echo "|---|---|---|"
for k in 1000 16 1; do
  echo "| $k | $(rate pg-drain-kfake-keys-$k) | $(jq -n "$(rate pg-drain-kfake-keys-$k) / $(rate pg-drain-kfake-keys-1000) * 100 | floor / 100") |"
done

# The relay's own database CPU at everyday rates: the CPU of the
# PostgreSQL backends behind the relay's pool and behind the producers'
# pool (steady gives the relay a pool of its own), per message.
dbcpu() { f "$1" '.steady | "\(.achieved_rate | floor) | \(.commit_to_confirm_ms.p50) | \(.commit_to_confirm_ms.p99) | \(.batches.mean_read * 10 | floor / 10) | \((.relay_db_cores // 0) * 1e6 / .achieved_rate | floor) | \((.producer_db_cores // 0) * 1e6 / .achieved_rate | floor) |"'; }
echo
echo "| steady → NATS (PostgreSQL), target msg/s | achieved | commit→confirm p50 ms | p99 ms | messages per round | relay's database CPU µs/msg | producers' database CPU µs/msg |"
echo "|---|---|---|---|---|---|---|"
for r in 100 1000 5000; do
  echo "| $r | $(dbcpu pg-steady-$r)"
done

