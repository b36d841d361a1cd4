#!/usr/bin/env bash
# A local PostgreSQL for development, in ./data/postgres (never the system service):
#   scripts/postgres-local.sh start [PORT]   initdb on first use, then start on 127.0.0.1:PORT (default 5433)
#   scripts/postgres-local.sh stop
#   scripts/postgres-local.sh url            prints the URL to pass to `toolgraph serve --db`
# Needs PostgreSQL's server binaries (Debian: apt-get install postgresql-15; or set PG_BIN). As root,
# initdb and pg_ctl run as the `postgres` user (initdb refuses root).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="$PWD/data/postgres"
PORT="${2:-${PGPORT_LOCAL:-5433}}"
BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
  echo "postgres-local: no initdb found; install postgresql-15 or set PG_BIN" >&2
  exit 2
fi
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "${1:-}" in
  start)
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$DIR"
    if [ ! -f "$DIR/PG_VERSION" ]; then
      as_pg "$BIN/initdb" -D "$DIR" -U postgres -A trust -E UTF8 --locale C >/dev/null
      echo "$PORT" > "$DIR/toolgraph-port"
    fi
    PORT="$(cat "$DIR/toolgraph-port")"
    as_pg "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w \
      -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1" start >/dev/null
    as_pg "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'toolgraph'" | grep -q 1 \
      || as_pg "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres toolgraph
    echo "postgres://postgres@127.0.0.1:$PORT/toolgraph"
    ;;
  stop)
    as_pg "$BIN/pg_ctl" -D "$DIR" -m fast -w stop
    ;;
  url)
    echo "postgres://postgres@127.0.0.1:$(cat "$DIR/toolgraph-port")/toolgraph"
    ;;
  *)
    echo "usage: scripts/postgres-local.sh start [PORT] | stop | url" >&2
    exit 2
    ;;
esac
