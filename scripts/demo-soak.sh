#!/usr/bin/env bash
# Runs `outbox demo` many times in a row with both cores kept busy, and
# tallies the verification lines: the demo's outage and random 503s must
# never make it end FAILED. Not part of `make test` (it takes minutes).
# Usage: scripts/demo-soak.sh [RUNS] [demo flags…]   (RUNS defaults to 30)
set -u

runs=${1:-30}
[ $# -gt 0 ] && shift
case "$runs" in ''|*[!0-9]*) echo "demo-soak.sh: RUNS must be a number, not '$runs'" >&2; exit 2 ;; esac

dir=$(mktemp -d)
bin="$dir/outbox"
busy=()
cleanup() {
  for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

go build -o "$bin" ./cmd/outbox || exit 1
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  busy+=("$!")
done

ok=0
failed=0
for i in $(seq 1 "$runs"); do
  out="$dir/run-$i.log"
  "$bin" demo "$@" >"$out" 2>&1
  code=$?
  line=$(grep '^verified ' "$out" | tail -n1)
  if [ "$code" -eq 0 ] && [[ "$line" == "verified OK"* ]]; then
    ok=$((ok + 1))
  else
    failed=$((failed + 1))
    cp "$out" "demo-soak-failed-$i.log"
    line=${line:-"no verification line (exit $code)"}
  fi
  printf 'run %2d/%d: %s\n' "$i" "$runs" "$line"
done
printf 'demo soak: %d × verified OK, %d failed (of %d, with two busy loops)\n' "$ok" "$failed" "$runs"
[ "$failed" -eq 0 ]
