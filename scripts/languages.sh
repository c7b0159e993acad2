#!/usr/bin/env bash
# Makes sure the other languages' producers in examples/ can run: PHP's
# command line with PDO for PostgreSQL and MySQL, and the JDBC drivers of
# PostgreSQL and MariaDB for the JDK. Installs the Debian packages that are
# missing through scripts/apt-install.sh. Exit status 0 when everything is
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

"$(dirname "$0")/apt-install.sh" - "${missing[@]}" || exit 1
php -r 'exit(extension_loaded("pdo_pgsql") && extension_loaded("pdo_mysql") ? 0 : 1);' ||
  { echo "languages.sh: PHP has no pdo_pgsql or pdo_mysql after installing" >&2; exit 1; }
