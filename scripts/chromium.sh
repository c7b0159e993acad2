#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the admin page's
# browser test and prints the path of its binary.
#
# Usage: scripts/chromium.sh
#
# CHROME_PATH, when set to an executable, is used as is. Otherwise the first of
# chromium, chromium-browser, google-chrome found on PATH is used; when none is,
# the Debian package `chromium` is installed (scripts/apt-install.sh: apt-get,
# as root or through sudo). Exit status 0 with the path on stdout; 1 with one line on stderr when
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

"$(dirname "$0")/apt-install.sh" chromium chromium >&2 || exit 1
if find_browser; then
  exit 0
fi
echo "chromium.sh: chromium was installed but is not on PATH" >&2
exit 1
