#!/usr/bin/env bash
# Tidies the go.mod and go.sum of every module of the workspace (go.work)
# and of internal/tooltest. The modules beside the root require the
# workspace's modules at the placeholder version
# v0.0.0-00010101000000-000000000000, which go.work resolves to this
# checkout; go mod tidy works on one module at a time without the
# workspace, so it runs with temporary replace directives pointing at the
# checkout, removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dirs=$(go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')
GOWORK=off go mod tidy
for dir in $dirs; do
  [ "$dir" = "." ] && continue
  (
    cd "$dir"
    paths=()
    for other in $dirs; do
      p=$(cd "$root/$other" && go mod edit -json | sed -n 's/^\t\t"Path": "\(.*\)"$/\1/p' | head -n1)
      [ "$root/$other" -ef . ] && continue
      go mod edit -replace "$p=$(realpath --relative-to=. "$root/$other")"
      paths+=("$p")
    done
    drop() { for p in "${paths[@]}"; do go mod edit -dropreplace "$p"; done; }
    trap drop EXIT
    GOWORK=off go mod tidy
  )
done
(cd internal/tooltest && GOWORK=off go mod tidy)
