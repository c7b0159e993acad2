#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the admin page's
# browser test and prints the path of its binary.
#
# Usage: scripts/chromium.sh
#
# CHROME_PATH, when set to an executable, is used as is. Otherwise the first of
# chromium, chromium-browser, google-chrome found on PATH is used; when none is,
# the Debian package `chromium` is installed with apt-get (as root, or through
# sudo). Exit status 0 with the path on stdout; 1 with one line on stderr when
# no browser could be found or installed.
set -u

find_browser() {
  if [ -n "${CHROME_PATH:-}" ] && [ -x "${CHROME_PATH}" ]; then
    echo "$CHROME_PATH"
    return 0
  fi
  for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if path=$(command -v "$name" 2>/dev/null); then
      echo "$path"
      return 0
    fi
  done
  return 1
}

if find_browser; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium.sh: no Chromium on PATH and no apt-get to install it; set CHROME_PATH" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo -n"
  else
    echo "chromium.sh: no Chromium on PATH and not root to install it; set CHROME_PATH" >&2
    exit 1
  fi
fi

echo "chromium.sh: installing the Debian package chromium" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! $sudo apt-get install -y -qq --no-install-recommends chromium >"$log" 2>&1; then
  # The package lists may be missing or stale; refresh them once and retry.
  if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends chromium; } >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    echo "chromium.sh: apt-get could not install chromium" >&2
    exit 1
  fi
fi

if find_browser; then
  exit 0
fi
echo "chromium.sh: chromium was installed but is not on PATH" >&2
exit 1
