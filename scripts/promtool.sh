#!/usr/bin/env bash
# Makes sure Prometheus's promtool is installed, for the tests of the alert
# rules in deploy/prometheus, and prints the path of its binary.
#
# Usage: scripts/promtool.sh
#
# PROMTOOL, when set to an executable, is used as is; otherwise promtool on
# PATH. When there is none, the Debian package `prometheus` (which ships
# promtool) is installed with apt-get, as root or through sudo; the server
# it also ships is stopped and disabled again under systemd (the tests need
# only promtool). Exit status 0 with the path on stdout; 1 with
# one line on stderr when promtool could not be found or installed.
set -u

find_promtool() {
  if [ -n "${PROMTOOL:-}" ] && [ -x "${PROMTOOL}" ]; then
    echo "$PROMTOOL"
    return 0
  fi
  command -v promtool 2>/dev/null
}

if find_promtool; then
  exit 0
fi

"$(dirname "$0")/apt-install.sh" promtool prometheus || exit 1

if [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
if find_promtool; then
  exit 0
fi
echo "promtool.sh: prometheus was installed but promtool is not on PATH" >&2
exit 1
