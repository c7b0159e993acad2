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

name=fauxqs
version=2.4.1
nodeversion=22
port=${FAUXQS_PORT:-14566}

. "$(dirname "${BASH_SOURCE[0]}")/aws-emulator.sh"

# answers: the server speaks SQS (ListQueues, JSON protocol).
answers() { aws_answers application/x-amz-json-1.0 AmazonSQS.ListQueues sqs; }

exit_if_up SQS

command -v npm >/dev/null || die "npm is not installed (apt-get install npm)"

mkdir -p "$dir" || die "cannot create $dir"
node=$dir/node_modules/.bin/node
cli=$dir/node_modules/fauxqs/dist/app.js
if [ ! -f "$cli" ] || [ ! -x "$node" ] || ! npm_installed fauxqs "$version"; then
  npm_install "fauxqs@$version" "node@$nodeversion"
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
wait_answers $!
