#!/usr/bin/env bash
# Makes sure the local services the tests need are running, starting any
# that is not. Usage: scripts/services.sh [postgres] [mariadb] [redis] [rabbitmq] [mosquitto] [nats] [pgbouncer] [fauxqs] [kinesalite]
# With no arguments it checks them all, and also installs the tools some
# tests run when they are missing: promtool (scripts/promtool.sh), zsh and
# fish (scripts/shells.sh). pgbouncer is a program, not a service: the
# tests start their own instances of it (internal/testkit/testpgbouncer); it is
# installed from Debian's package when missing. fauxqs (SQS and SNS) and
# kinesalite (Kinesis) are the cloud destinations' local servers, from npm,
# installed and started by scripts/emulators/ (Pub/Sub's runs inside its
# tests).
set -u

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  case "$1" in
    postgres) pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start ;;
    # --pidfile: a private mariadbd of a test or a bench must not pass for
    # the shared one.
    mariadb) start-stop-daemon --start --oknodo --background --pidfile /run/mysqld/mysqld.pid --exec /usr/sbin/mariadbd ;;
    redis) redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log ;;
    rabbitmq) rabbitmq-server -detached ;;
    mosquitto) mosquitto -d -c /etc/mosquitto/mosquitto.conf ;;
    nats) start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log ;;
  esac
}

port_of() {
  case "$1" in
    postgres) echo 5432 ;; mariadb) echo 3306 ;; redis) echo 6379 ;;
    rabbitmq) echo 5672 ;; mosquitto) echo 1883 ;; nats) echo 4222 ;;
    *) echo "services.sh: unknown service $1" >&2; exit 2 ;;
  esac
}

tools=0
[ $# -gt 0 ] || { tools=1; set -- postgres mariadb redis rabbitmq mosquitto nats pgbouncer fauxqs kinesalite; }
failed=0
for svc in "$@"; do
  if [ "$svc" = pgbouncer ]; then
    "$(dirname "$0")/apt-install.sh" pgbouncer pgbouncer || failed=1
    continue
  fi
  if [ "$svc" = fauxqs ] || [ "$svc" = kinesalite ]; then
    "$(dirname "$0")/emulators/$svc.sh" || failed=1
    continue
  fi
  port=$(port_of "$svc")
  port_open "$port" && continue
  echo "services.sh: $svc is not listening on 127.0.0.1:$port; starting it" >&2
  start "$svc" >/dev/null 2>&1 || true
  for _ in $(seq 1 60); do
    port_open "$port" && break
    sleep 1
  done
  if ! port_open "$port"; then
    echo "services.sh: could not start $svc (nothing on 127.0.0.1:$port after 60 s)" >&2
    failed=1
  fi
done
if [ "$tools" = 1 ]; then
  "$(dirname "$0")/promtool.sh" >/dev/null || failed=1
  "$(dirname "$0")/shells.sh" || failed=1
fi
exit $failed
