#!/usr/bin/env bash
# Makes sure the other languages' producers in examples/ can run: PHP's
# command line with PDO for PostgreSQL and MySQL, and the JDBC drivers of
# PostgreSQL and MariaDB for the JDK. Installs the Debian packages that are
# missing (as root, or through sudo). Exit status 0 when everything is
# there; 1 with one line on stderr otherwise.
#
# Usage: scripts/languages.sh
set -u

missing=()
php -r 'exit(extension_loaded("pdo_pgsql") && extension_loaded("pdo_mysql") ? 0 : 1);' >/dev/null 2>&1 ||
  missing+=(php-cli php-pgsql php-mysql)
[ -f /usr/share/java/postgresql.jar ] || missing+=(libpostgresql-jdbc-java)
[ -f /usr/share/java/mariadb-java-client.jar ] || missing+=(libmariadb-java)
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "languages.sh: not root and no sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo -n"
fi
echo "languages.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    echo "languages.sh: apt-get could not install ${missing[*]}" >&2
    exit 1
  fi
fi
php -r 'exit(extension_loaded("pdo_pgsql") && extension_loaded("pdo_mysql") ? 0 : 1);' ||
  { echo "languages.sh: PHP has no pdo_pgsql or pdo_mysql after installing" >&2; exit 1; }
