# Sourced by the scripts that install and start a local AWS service
# emulator from npm (fauxqs.sh, kinesalite.sh), which set name (the
# emulator's, its npm package's) and port (127.0.0.1's) before sourcing
# and define answers, the check that the server is up. It sets dir, where
# the emulator is installed (${OUTBOX_CACHE:-$HOME/.cache/outbox}/emulators/NAME,
# never in the repository), and log, the file npm and the server log to
# there. Nothing here runs by itself.

dir=${OUTBOX_CACHE:-$HOME/.cache/outbox}/emulators/$name
log=$dir/$name.log

die() { echo "$name.sh: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

# aws_answers CONTENT-TYPE TARGET SERVICE: the server on the port answers
# the AWS JSON-protocol call TARGET (signed for SERVICE, with a signature
# an emulator does not check), not just any program holding the port.
# Without curl, a port taken is taken to answer.
aws_answers() {
  command -v curl >/dev/null || { port_open; return; }
  curl -fsS -m 2 -o /dev/null -X POST "http://127.0.0.1:$port/" \
    -H "Content-Type: $1" \
    -H "X-Amz-Target: $2" \
    -H "Authorization: AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/$3/aws4_request, SignedHeaders=host, Signature=0" \
    -H 'X-Amz-Date: 20240101T000000Z' \
    -d '{}' 2>/dev/null
}

# exit_if_up PROTOCOL: exits 0 when the server already answers; dies
# when the port is taken by something that does not answer as PROTOCOL.
exit_if_up() {
  answers && exit 0
  port_open && die "port $port is taken by something that does not answer as $1"
}

# npm_install PACKAGE@VERSION...: installs the packages under dir, npm's
# output to the log.
npm_install() {
  [ -f "$dir/package.json" ] || echo '{"private":true}' >"$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$@" >>"$log" 2>&1 ||
    die "npm install $* failed (see $log)"
}

# npm_installed PACKAGE VERSION: PACKAGE is installed under dir at VERSION.
npm_installed() {
  grep -q "\"version\": \"$2\"" "$dir/node_modules/$1/package.json" 2>/dev/null
}

# wait_answers PID: exits 0 once the server started as PID answers
# (answers, the script's own check), dies if it exits first or has not
# answered within 60 s.
wait_answers() {
  for _ in $(seq 1 120); do
    answers && exit 0
    kill -0 "$1" 2>/dev/null || die "$name exited at start (see $log)"
    sleep 0.5
  done
  die "$name did not answer on 127.0.0.1:$port within 60 s (see $log)"
}
