#!/usr/bin/env bash
# Installs Debian packages the tests need when COMMAND is not on PATH.
#
# Usage: scripts/apt-install.sh COMMAND PACKAGE…
#
# Exit status 0 when COMMAND is found (already, or after installing the
# packages with apt-get, as root or through sudo); 1 with one line on stderr
# otherwise. COMMAND "-" installs the packages unconditionally, for callers
# that check for what they need themselves (libraries, extensions). Services a package starts on installation are left stopped:
# the tests start their own instances.
set -u
[ $# -ge 2 ] || { echo "usage: scripts/apt-install.sh COMMAND PACKAGE…" >&2; exit 2; }
cmd=$1
shift

found() { [ "$cmd" = - ] || command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ]; }
[ "$cmd" != - ] && found && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "apt-install.sh: no $cmd on PATH and no apt-get to install $*" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo -n"
  else
    echo "apt-install.sh: no $cmd on PATH and not root to install $*" >&2
    exit 1
  fi
fi

echo "apt-install.sh: installing the Debian package(s) $*" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
# A policy that forbids starting services while the packages install.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod +x "$policy" && own_policy=1
fi
cleanup() {
  rm -f "$log"
  [ "$own_policy" = 1 ] && $sudo rm -f "$policy"
}
trap cleanup EXIT
if ! $sudo apt-get install -y -qq --no-install-recommends "$@" >"$log" 2>&1; then
  # The package lists may be missing or stale; refresh them once and retry.
  if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "$@"; } >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    echo "apt-install.sh: apt-get could not install $*" >&2
    exit 1
  fi
fi
found && exit 0
echo "apt-install.sh: $* installed but $cmd is not on PATH" >&2
exit 1
