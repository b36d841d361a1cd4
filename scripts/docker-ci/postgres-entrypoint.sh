#!/bin/sh
# The official postgres image's contract, in short: as root, own PGDATA and drop to `postgres`; on
# an empty PGDATA, initdb with POSTGRES_USER (default postgres) and POSTGRES_PASSWORD (required), then
# create POSTGRES_DB (default: the user's name); then run the server listening on every address.
set -eu
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" && chown -R postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?postgres stand-in: set POSTGRES_PASSWORD}"
  user="${POSTGRES_USER:-postgres}"
  db="${POSTGRES_DB:-$user}"
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$db" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --username="$user" --dbname=postgres -c "CREATE DATABASE \"$db\"" >/dev/null
  fi
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres stand-in: initialised $PGDATA (user $user, database $db)"
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -c listen_addresses='*' "$@"
fi
exec "$@"
