#!/usr/bin/env bash
# Makes sure zsh and fish are installed, so the test of 'outbox completion'
# parses the scripts it writes for them (zsh -n, fish -n) as well as bash's.
# Missing shells are installed from their Debian packages (as root, or
# through sudo). Exit status 0 when both are there; 1 with one line on
# stderr otherwise.
set -u
failed=0
for sh in zsh fish; do
  "$(dirname "$0")/apt-install.sh" "$sh" "$sh" || failed=1
done
exit $failed
