#!/usr/bin/env bash
# Makes sure a local SQS and SNS server (npm fauxqs) answers on
# 127.0.0.1:${FAUXQS_PORT:-14566}, installing and starting it when it does
# not. Safe to run again: a server already answering is left alone.
# Queues and topics live in memory and are gone when the server stops.
# fauxqs needs Node 22.5 or later; npm's node@22 package is installed
# beside it and runs it, whatever node is on the PATH. Both packages go to
# ${OUTBOX_CACHE:-$HOME/.cache/outbox}/emulators/fauxqs, never into the
# repository; the server logs to fauxqs.log there. The server is made to
# listen on 127.0.0.1 only.
# The tests of publisher/outboxsqs and publisher/outboxsns read
# OUTBOX_TEST_AWS_ENDPOINT (default http://127.0.0.1:14566).
set -u

version=2.4.1
nodeversion=22
port=${FAUXQS_PORT:-14566}
dir=${OUTBOX_CACHE:-$HOME/.cache/outbox}/emulators/fauxqs
log=$dir/fauxqs.log

die() { echo "fauxqs.sh: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

# answers: the server speaks SQS (ListQueues, JSON protocol), not just any
# program holding the port.
answers() {
  command -v curl >/dev/null || { port_open; return; }
  curl -fsS -m 2 -o /dev/null -X POST "http://127.0.0.1:$port/" \
    -H 'Content-Type: application/x-amz-json-1.0' \
    -H 'X-Amz-Target: AmazonSQS.ListQueues' \
    -H 'Authorization: AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0' \
    -H 'X-Amz-Date: 20240101T000000Z' \
    -d '{}' 2>/dev/null
}

answers && exit 0
port_open && die "port $port is taken by something that does not answer as SQS"

command -v npm >/dev/null || die "npm is not installed (apt-get install npm)"

mkdir -p "$dir" || die "cannot create $dir"
node=$dir/node_modules/.bin/node
cli=$dir/node_modules/fauxqs/dist/app.js
if [ ! -f "$cli" ] || [ ! -x "$node" ] ||
  ! grep -q "\"version\": \"$version\"" "$dir/node_modules/fauxqs/package.json" 2>/dev/null; then
  [ -f "$dir/package.json" ] || echo '{"private":true}' >"$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "fauxqs@$version" "node@$nodeversion" >>"$log" 2>&1 ||
    die "npm install fauxqs@$version node@$nodeversion failed (see $log)"
fi
[ -f "$cli" ] || die "fauxqs@$version installed without $cli"
[ -x "$node" ] || die "node@$nodeversion installed without $node"

# fauxqs binds every interface; the launcher pins its listener to loopback.
cat >"$dir/start.mjs" <<'EOF'
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (args[0] !== null && typeof args[0] === "object") args[0] = { ...args[0], host: "127.0.0.1" };
  return listen.apply(this, args);
};
const { startFauxqs } = await import("fauxqs");
await startFauxqs({ port: Number(process.env.FAUXQS_PORT), logger: false });
EOF

(cd "$dir" && FAUXQS_PORT=$port FAUXQS_LOGGER=false nohup "$node" start.mjs >>"$log" 2>&1 </dev/null) &
pid=$!
for _ in $(seq 1 120); do
  answers && exit 0
  kill -0 "$pid" 2>/dev/null || die "fauxqs exited at start (see $log)"
  sleep 0.5
done
die "fauxqs did not answer on 127.0.0.1:$port within 60 s (see $log)"
