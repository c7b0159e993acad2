#!/usr/bin/env bash
# Makes sure a current nats-server is built for the tests that run a
# JetStream cluster of their own (internal/testkit/testnats.Start), and prints the
# path of its binary.
#
# Usage: scripts/nats-cluster.sh
#
# Debian's package (2.9) serves the shared server on 4222, but its
# clustered streams can lose messages they acknowledged when the stream's
# leader is killed (fixed in later releases); a test that kills leaders
# must measure the relay, not that. OUTBOX_NATS_CLUSTER_SERVER, when set to
# an executable, is used as is; otherwise the release below is built once
# from the Go module proxy into the user's cache. Exit status 0 with the
# path on stdout; 1 with one line on stderr when it could not be built.
set -u

version=v2.15.3
if [ -n "${OUTBOX_NATS_CLUSTER_SERVER:-}" ] && [ -x "$OUTBOX_NATS_CLUSTER_SERVER" ]; then
  echo "$OUTBOX_NATS_CLUSTER_SERVER"
  exit 0
fi
dir="${XDG_CACHE_HOME:-$HOME/.cache}/outbox/nats-server-$version"
if [ ! -x "$dir/nats-server" ]; then
  mkdir -p "$dir" || exit 1
  if ! out=$(cd "$dir" && GOWORK=off GOBIN="$dir" go install "github.com/nats-io/nats-server/v2@$version" 2>&1); then
    echo "nats-cluster.sh: could not build nats-server $version: $(echo "$out" | tail -n1)" >&2
    exit 1
  fi
fi
echo "$dir/nats-server"
