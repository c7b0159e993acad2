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

name=kinesalite
version=3.3.3
port=${KINESALITE_PORT:-14567}

. "$(dirname "${BASH_SOURCE[0]}")/aws-emulator.sh"

# answers: the server speaks Kinesis (ListStreams).
answers() { aws_answers application/x-amz-json-1.1 Kinesis_20131202.ListStreams kinesis; }

exit_if_up Kinesis

command -v node >/dev/null || die "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm is not installed (apt-get install npm)"

mkdir -p "$dir" || die "cannot create $dir"
bin=$dir/node_modules/kinesalite/cli.js
if [ ! -f "$bin" ] || ! npm_installed kinesalite "$version"; then
  npm_install "kinesalite@$version"
fi
[ -f "$bin" ] || die "kinesalite@$version installed without $bin"

# The package's own command listens on every interface; this launcher
# binds the loopback address only.
# kinesalite throws from a request's error event when a client goes away
# in the middle of a request (a relay killed while it publishes, a proxy
# cutting the connection), which would end the whole server: that error
# is the client's, so the launcher logs it and the server goes on.
cat >"$dir/serve.js" <<'JS'
const port = Number(process.argv[2]);
process.on("uncaughtException", (err) => {
  if (err && (err.code === "ECONNRESET" || err.message === "aborted")) {
    console.error("kinesalite: a client went away mid-request: " + err.message);
    return;
  }
  console.error(err);
  process.exit(1);
});
const server = require("kinesalite")({ createStreamMs: 50, deleteStreamMs: 50, updateStreamMs: 50, shardLimit: 10000 });
server.listen(port, "127.0.0.1", () => console.log("kinesalite listening on 127.0.0.1:" + port));
JS
(cd "$dir" && exec nohup node serve.js "$port" >>"$log" 2>&1 </dev/null) &
wait_answers $!
