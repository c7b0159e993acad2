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

if ! command -v apt-get >/dev/null 2>&1; then
  echo "promtool.sh: no promtool on PATH and no apt-get to install it; set PROMTOOL" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo -n"
  else
    echo "promtool.sh: no promtool on PATH and not root to install it; set PROMTOOL" >&2
    exit 1
  fi
fi

echo "promtool.sh: installing the Debian package prometheus" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
install() { $sudo apt-get install -y -qq --no-install-recommends prometheus; }
if ! install >"$log" 2>&1; then
  # The package lists may be missing or stale; refresh them once and retry.
  if ! { $sudo apt-get update -qq && install; } >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    echo "promtool.sh: apt-get could not install prometheus" >&2
    exit 1
  fi
fi

if [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
if find_promtool; then
  exit 0
fi
echo "promtool.sh: prometheus was installed but promtool is not on PATH" >&2
exit 1
