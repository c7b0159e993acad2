#!/usr/bin/env bash
# Tidies the go.mod and go.sum of every module of the workspace (go.work)
# and of internal/tooltest. The modules beside the root require the outbox
# module at the placeholder version v0.0.0-00010101000000-000000000000,
# which the workspace resolves to this checkout; go mod tidy works on one
# module at a time without the workspace, so it runs with a temporary
# replace directive pointing at the checkout, removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
GOWORK=off go mod tidy
for dir in $(go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p') internal/tooltest; do
  [ "$dir" = "." ] && continue
  (
    cd "$dir"
    rel=$(realpath --relative-to="$PWD" "$root")
    if grep -q "^replace github.com/txoutbox/outbox => " go.mod; then
      GOWORK=off go mod tidy
    else
      go mod edit -replace "github.com/txoutbox/outbox=$rel"
      trap 'go mod edit -dropreplace github.com/txoutbox/outbox' EXIT
      GOWORK=off go mod tidy
    fi
  )
done
