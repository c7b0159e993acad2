#!/usr/bin/env bash
# Makes sure a local Kinesis server (npm kinesalite) answers on
# 127.0.0.1:${KINESALITE_PORT:-14567}, installing and starting it when it
# does not. Safe to run again: a server already answering is left alone.
# Streams live in memory and are gone when the server stops; a new stream
# turns ACTIVE after 50 ms; up to 10,000 shards may be open at once. The
# package is installed under ${OUTBOX_CACHE:-$HOME/.cache/outbox}/emulators/kinesalite,
# never in the repository; the server logs to kinesalite.log there.
# The tests of publisher/outboxkinesis read OUTBOX_TEST_KINESIS_ENDPOINT
# (default http://127.0.0.1:14567).
set -u

version=3.3.3
port=${KINESALITE_PORT:-14567}
dir=${OUTBOX_CACHE:-$HOME/.cache/outbox}/emulators/kinesalite
log=$dir/kinesalite.log

die() { echo "kinesalite.sh: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

# answers: the server speaks Kinesis (ListStreams), not just any program
# holding the port.
answers() {
  command -v curl >/dev/null || { port_open; return; }
  curl -fsS -m 2 -o /dev/null -X POST "http://127.0.0.1:$port/" \
    -H 'Content-Type: application/x-amz-json-1.1' \
    -H 'X-Amz-Target: Kinesis_20131202.ListStreams' \
    -H 'Authorization: AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/kinesis/aws4_request, SignedHeaders=host, Signature=0' \
    -H 'X-Amz-Date: 20240101T000000Z' \
    -d '{}' 2>/dev/null
}

answers && exit 0
port_open && die "port $port is taken by something that does not answer as Kinesis"

command -v node >/dev/null || die "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm is not installed (apt-get install npm)"

mkdir -p "$dir" || die "cannot create $dir"
bin=$dir/node_modules/kinesalite/cli.js
if [ ! -f "$bin" ] || ! grep -q "\"version\": \"$version\"" "$dir/node_modules/kinesalite/package.json" 2>/dev/null; then
  [ -f "$dir/package.json" ] || echo '{"private":true}' >"$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "kinesalite@$version" >>"$log" 2>&1 ||
    die "npm install kinesalite@$version failed (see $log)"
fi
[ -f "$bin" ] || die "kinesalite@$version installed without $bin"

# The package's own command listens on every interface; this launcher
# binds the loopback address only.
cat >"$dir/serve.js" <<'JS'
const port = Number(process.argv[2]);
const server = require("kinesalite")({ createStreamMs: 50, deleteStreamMs: 50, updateStreamMs: 50, shardLimit: 10000 });
server.listen(port, "127.0.0.1", () => console.log("kinesalite listening on 127.0.0.1:" + port));
JS
(cd "$dir" && exec nohup node serve.js "$port" >>"$log" 2>&1 </dev/null) &
pid=$!
for _ in $(seq 1 120); do
  answers && exit 0
  kill -0 "$pid" 2>/dev/null || die "kinesalite exited at start (see $log)"
  sleep 0.5
done
die "kinesalite did not answer on 127.0.0.1:$port within 60 s (see $log)"
