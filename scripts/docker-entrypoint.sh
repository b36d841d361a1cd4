#!/bin/sh
# The image's entrypoint: `toolgraph ARGS…`. Before `serve`, it checks that the database's directory is
# writable by this user (uid 1000, `node`): a bind-mounted host directory owned by root is not, and
# SQLite would fail with a bare "unable to open database file". It then says what to do.
set -eu
if [ "${1:-}" = serve ]; then
  db=/data/toolgraph.db
  prev=
  for arg in "$@"; do
    [ "$prev" = --db ] && db=$arg
    case $arg in --db=*) db=${arg#--db=} ;; esac
    prev=$arg
  done
  case $db in postgres://* | postgresql://* | :memory:) dir= ;; *) dir=$(dirname "$db") ;; esac
  if [ -n "$dir" ] && [ -d "$dir" ] && [ ! -w "$dir" ]; then
    owner=$(stat -c %u:%g "$dir")
    cat >&2 <<MSG
toolgraph: cannot write the database directory $dir (owned by $owner) as uid $(id -u).
  A bind-mounted host directory must belong to the container's user (uid 1000):
    sudo chown 1000:1000 /path/on/host
  or keep the database on a named volume (docker-compose.yml does: toolgraph-data:/data),
  or run the container as the directory's owner: docker run --user $owner ...
MSG
    exit 1
  fi
fi
exec node /app/bin/toolgraph.mjs "$@"
