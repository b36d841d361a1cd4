#!/usr/bin/env bash
# CI for the container image and docker-compose.yml: builds the Dockerfile unchanged and runs it.
#
# No Docker engine or registry image is on the build machines, so this script
#   1. installs Debian's docker.io, docker-compose and debootstrap if they are missing;
#   2. starts a plain dockerd of its own (own socket, pidfile, exec-root and data-root) and stops only
#      that one, whatever happens;
#   3. makes local stand-ins for the images the files name: node:20-bookworm-slim (bookworm minbase
#      from debootstrap, this machine's Node 20 and npm, a `node` user with uid 1000) and, when the
#      compose file uses it, postgres:15 (Debian's postgresql-15; scripts/docker-ci/);
#   4. builds the image and checks: HEALTHCHECK healthy; a run submitted with the agent key; a SIGTERM
#      drain that lets a running call finish; a run that survives down/up on the named volume; a
#      root-owned bind mount refused with a message that says what to do; then the same through
#      docker-compose (on its PostgreSQL), and the backup and restore of docs/operations.md (SQLite);
#      then two replicas (docker-compose.replicas.yml): both answer, and a run submitted to one is
#      read through the other, which names its owner.
# Everything it makes lives under .tmp/docker-ci (DOCKER_CI_DIR) and /run/toolgraph-docker-ci.PID, and
# is removed at the end; DOCKER_CI_KEEP=1 keeps the data-root (and so the stand-ins) for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${DOCKER_CI_DIR:-$ROOT/.tmp/docker-ci}
KEEP=${DOCKER_CI_KEEP:-0}
RUNDIR=/run/toolgraph-docker-ci.$$
DOCKER=/usr/bin/docker # not `docker`: another one on the PATH shadows Debian's client
SOCK=$RUNDIR/docker.sock
export DOCKER_HOST=unix://$SOCK
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0 # the classic builder: FROM resolves to local images
PROJECT=toolgraphci
NAME=toolgraph-ci
VOLUME=toolgraph-ci-data
IMAGE=toolgraph:ci
START=$(date +%s)
DOCKERD_PID=

step() { printf '\n=== [%4ss] %s\n' "$(($(date +%s) - START))" "$*"; }
ok() { printf '  ok   %s\n' "$*"; }
fail() {
  printf '  FAIL %s\n' "$*" >&2
  exit 1
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  step "cleanup"
  if [ -n "$DOCKERD_PID" ] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
    if [ -f "$ROOT/docker-compose.replicas.yml" ]; then
      compose2 down -v --remove-orphans >/dev/null 2>&1
    elif [ -f "$ROOT/docker-compose.yml" ]; then
      compose down -v --remove-orphans >/dev/null 2>&1
    fi
    local ids
    ids=$($DOCKER ps -aq 2>/dev/null)
    [ -n "$ids" ] && $DOCKER rm -f $ids >/dev/null 2>&1
    $DOCKER volume rm -f "$VOLUME" >/dev/null 2>&1
    kill -TERM "$DOCKERD_PID"
    for _ in $(seq 1 30); do
      kill -0 "$DOCKERD_PID" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "$DOCKERD_PID" 2>/dev/null; then
      echo "  dockerd $DOCKERD_PID did not stop in 30 s: killing it"
      kill -KILL "$DOCKERD_PID"
    fi
    wait "$DOCKERD_PID" 2>/dev/null
    echo "  stopped dockerd $DOCKERD_PID"
  fi
  # Overlay mounts left by a killed daemon would keep the data-root busy.
  grep -o " $WORK/[^ ]*\| $RUNDIR[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf "$RUNDIR" "$WORK/rootfs" "$WORK/node-context" "$WORK/body"
  if [ "$KEEP" != 1 ]; then rm -rf "$WORK"; fi
  if [ "$rc" -eq 0 ]; then
    step "docker CI passed in $(($(date +%s) - START)) s"
  else
    [ -f "$WORK/dockerd.log" ] && { echo "--- last lines of dockerd.log"; tail -n 20 "$WORK/dockerd.log"; }
    step "docker CI FAILED (exit $rc) after $(($(date +%s) - START)) s"
  fi
  exit "$rc"
}

compose() { /usr/bin/docker-compose -p "$PROJECT" -f "$ROOT/docker-compose.yml" "$@"; }
# The compose file with the second replica's override.
compose2() { /usr/bin/docker-compose -p "$PROJECT" -f "$ROOT/docker-compose.yml" -f "$ROOT/docker-compose.replicas.yml" "$@"; }

free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

# api METHOD PATH [BODY] [KEY]: the status code on stdout, the body in $WORK/body.
api() {
  local key=${4-$TOOLGRAPH_AGENT_KEY}
  curl -sS -o "$WORK/body" -w '%{http_code}' -X "$1" -H 'content-type: application/json' \
    ${key:+-H "authorization: Bearer $key"} ${3:+--data "$3"} "$BASE$2"
}
# field EXPR: EXPR evaluated on the last body, as `b`.
field() { node -e "const b=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8')); console.log(String($1))" "$WORK/body"; }

expect_code() { # expect_code WANT GOT WHAT
  [ "$2" = "$1" ] || fail "$3: HTTP $2, expected $1: $(head -c 400 "$WORK/body")"
}

wait_healthy() { # wait_healthy CONTAINER SECONDS
  local status state
  for _ in $(seq 1 "$2"); do
    state=$($DOCKER inspect -f '{{.State.Status}}' "$1")
    status=$($DOCKER inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$1")
    [ "$status" = healthy ] && return 0
    if [ "$state" != running ]; then
      $DOCKER logs --tail 30 "$1" >&2
      fail "$1 is $state (health $status)"
    fi
    sleep 1
  done
  $DOCKER logs --tail 30 "$1" >&2
  fail "$1 not healthy after $2 s (health $status)"
}

wait_call_running() { # wait_call_running RUN_ID
  for _ in $(seq 1 100); do
    expect_code 200 "$(api GET "/v1/runs/$1")" "GET /v1/runs/$1"
    [ "$(field 'b.calls[0].status')" = running ] && return 0
    sleep 0.1
  done
  fail "run $1: its call never started"
}

run_container() { # run_container PORT: the service on the named volume, like docker-compose.yml
  $DOCKER run -d --name "$NAME" -p "127.0.0.1:$1:8080" \
    -e TOOLGRAPH_AGENT_KEY -e TOOLGRAPH_OPERATOR_KEY -e LOG_LEVEL=info \
    -v "$VOLUME:/data" -v "$ROOT/examples/docker/toolgraph.yaml:/config/toolgraph.yaml:ro" "$IMAGE" >/dev/null
}

image_exists() { $DOCKER image inspect "$1" >/dev/null 2>&1; }

# --- 1. tools ------------------------------------------------------------------------------------
step "Debian packages: docker.io, docker-compose, debootstrap"
missing=()
[ -x /usr/bin/docker ] && [ -x /usr/sbin/dockerd ] || missing+=(docker.io)
[ -x /usr/bin/docker-compose ] || missing+=(docker-compose)
[ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  ok "installed ${missing[*]}"
else
  ok "already installed"
fi
NODE_BIN=$(readlink -f "$(command -v node)")
NODE_VERSION=$("$NODE_BIN" -p process.versions.node)
[ "${NODE_VERSION%%.*}" = 20 ] || fail "the stand-in for node:20 needs this machine's Node to be 20.x, found $NODE_VERSION"

# --- 2. a dockerd of our own ---------------------------------------------------------------------
step "dockerd (data-root $WORK/data-root, socket $SOCK)"
mkdir -p "$WORK" "$RUNDIR"
trap cleanup EXIT
trap 'exit 130' INT TERM
/usr/sbin/dockerd --data-root "$WORK/data-root" --exec-root "$RUNDIR/exec" --pidfile "$RUNDIR/dockerd.pid" \
  -H "unix://$SOCK" >"$WORK/dockerd.log" 2>&1 &
DOCKERD_PID=$!
for _ in $(seq 1 60); do
  $DOCKER version >/dev/null 2>&1 && break
  kill -0 "$DOCKERD_PID" 2>/dev/null || fail "dockerd exited at start (see dockerd.log below)"
  sleep 1
done
$DOCKER version >/dev/null 2>&1 || fail "dockerd did not answer in 60 s"
ok "dockerd $DOCKERD_PID, server $($DOCKER version -f '{{.Server.Version}}')"

# --- 3. stand-ins for the base images --------------------------------------------------------------
# The Debian mirror apt uses on this machine, for debootstrap and for apt inside the images.
sources=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
MIRROR=${DEBIAN_MIRROR:-$(printf '%s\n' "$sources" | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ')}
[ -n "$MIRROR" ] || fail "no Debian mirror in the apt sources of this machine: set DEBIAN_MIRROR"
MIRROR=${MIRROR%/}
SECURITY=$(printf '%s\n' "$sources" | grep -oE 'https?://[^ ]+/debian-security/?( |$)' | head -n1 | tr -d ' ')
SECURITY=${SECURITY:-$MIRROR-security}
SECURITY=${SECURITY%/}

if image_exists toolgraph-ci/bookworm-minbase; then
  step "bookworm minbase: kept from the last run"
else
  step "bookworm minbase from $MIRROR (debootstrap)"
  rm -rf "$WORK/rootfs"
  if ! debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
    tail -n 20 "$WORK/debootstrap.log"
    fail "debootstrap"
  fi
  rm -f "$WORK/rootfs/etc/apt/sources.list"
  cat >"$WORK/rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$WORK/rootfs/var/lib/apt/lists/"* "$WORK/rootfs/var/cache/apt/"*.bin "$WORK/rootfs/var/cache/apt/archives/"*.deb
  tar -C "$WORK/rootfs" --numeric-owner -c . | $DOCKER import - toolgraph-ci/bookworm-minbase >/dev/null
  rm -rf "$WORK/rootfs"
  ok "imported toolgraph-ci/bookworm-minbase"
fi

if image_exists node:20-bookworm-slim; then
  step "stand-in node:20-bookworm-slim: kept from the last run"
else
  step "stand-in node:20-bookworm-slim (Node $NODE_VERSION from $NODE_BIN)"
  prefix=$(dirname "$(dirname "$NODE_BIN")")
  npm_dir=$(npm root -g)/npm
  [ -d "$prefix/include/node" ] || fail "no Node headers at $prefix/include/node"
  rm -rf "$WORK/node-context" && mkdir -p "$WORK/node-context"
  cp "$NODE_BIN" "$WORK/node-context/node"
  cp -a "$npm_dir" "$WORK/node-context/npm"
  cp -a "$prefix/include/node" "$WORK/node-context/include"
  cp /etc/ssl/certs/ca-certificates.crt "$WORK/node-context/ca-certificates.crt"
  $DOCKER build -q -t node:20-bookworm-slim -f scripts/docker-ci/node.Dockerfile "$WORK/node-context" >/dev/null
  rm -rf "$WORK/node-context"
  ok "node $($DOCKER run --rm node:20-bookworm-slim node --version), npm $($DOCKER run --rm node:20-bookworm-slim npm --version), user $($DOCKER run --rm -u node node:20-bookworm-slim id -u)"
fi

WITH_POSTGRES=0
if grep -qE 'image:[[:space:]]*"?postgres:15' docker-compose.yml || [ "${DOCKER_CI_POSTGRES:-0}" = 1 ]; then WITH_POSTGRES=1; fi
if [ "$WITH_POSTGRES" = 1 ]; then
  if image_exists postgres:15; then
    step "stand-in postgres:15: kept from the last run"
  else
    step "stand-in postgres:15 (Debian's postgresql-15)"
    $DOCKER build -q -t postgres:15 -f scripts/docker-ci/postgres.Dockerfile scripts/docker-ci >/dev/null
    ok "built"
  fi
fi

# --- 4. the image --------------------------------------------------------------------------------
step "docker build (the Dockerfile as it is)"
build_start=$(date +%s)
if ! $DOCKER build -t "$IMAGE" -t toolgraph:latest . >"$WORK/build.log" 2>&1; then
  tail -n 40 "$WORK/build.log"
  fail "docker build"
fi
size=$($DOCKER image inspect -f '{{.Size}}' "$IMAGE")
base=$($DOCKER image inspect -f '{{.Size}}' node:20-bookworm-slim)
addon=$($DOCKER run --rm --entrypoint sh "$IMAGE" -c 'du -sk node_modules/better-sqlite3 | cut -f1')
ok "built in $(($(date +%s) - build_start)) s: $((size / 1000000)) MB ($(((size - base) / 1000000)) MB over the base), better-sqlite3 ${addon} kB"
[ "$addon" -lt 4096 ] || fail "better-sqlite3 keeps its build leftovers (${addon} kB)"

export TOOLGRAPH_AGENT_KEY="ci-agent-$RANDOM$RANDOM" TOOLGRAPH_OPERATOR_KEY="ci-operator-$RANDOM$RANDOM"
# The compose file's PostgreSQL password (docker-compose.yml requires it to be set).
export TOOLGRAPH_DB_PASSWORD="ci-db-$RANDOM$RANDOM"
PORT=$(free_port)
BASE=http://127.0.0.1:$PORT

step "docker run: HEALTHCHECK"
$DOCKER rm -f "$NAME" >/dev/null 2>&1 || true
$DOCKER volume rm -f "$VOLUME" >/dev/null 2>&1 || true
$DOCKER volume create "$VOLUME" >/dev/null
run_container "$PORT"
wait_healthy "$NAME" 90
ok "healthy; $($DOCKER inspect -f '{{.Config.User}}' "$NAME") user, port $PORT"

step "a run submitted with the agent key"
expect_code 401 "$(api POST /v1/runs '{"calls":[{"id":"a","tool":"echo","args":{}}]}' '')" "POST /v1/runs without a key"
ok "without a key: 401 $(field 'b.error.code')"
code=$(api POST /v1/runs '{"waitMs":10000,"calls":[{"id":"read","tool":"read_file","args":{"path":"/repo/a.ts"}},{"id":"write","tool":"write_file","args":{"path":"${read.output.path}"}},{"id":"nap","tool":"sleep","args":{"ms":100}}]}')
expect_code 201 "$code" "POST /v1/runs"
[ "$(field 'b.status')" = succeeded ] || fail "run: $(field 'b.status'), expected succeeded"
[ "$(field 'b.calls.map((c) => c.id + ":" + c.status).join(" ")')" = "read:succeeded write:succeeded nap:succeeded" ] || fail "calls: $(field 'JSON.stringify(b.calls)')"
[ "$(field 'b.calls[1].dependsOn.join()')" = read ] || fail "write should depend on read"
RUN1=$(field 'b.id')
ok "run $RUN1 succeeded: read, write (after read), nap"

step "SIGTERM drain: a running call finishes"
expect_code 201 "$(api POST /v1/runs '{"calls":[{"id":"long","tool":"sleep","args":{"ms":3000}}]}')" "POST /v1/runs (long)"
RUN2=$(field 'b.id')
wait_call_running "$RUN2"
stop_start=$(date +%s.%N)
$DOCKER stop "$NAME" >/dev/null # SIGTERM, then SIGKILL after docker's default 10 s
stop_s=$(node -p "($(date +%s.%N) - $stop_start).toFixed(1)")
exit_code=$($DOCKER inspect -f '{{.State.ExitCode}}' "$NAME")
[ "$exit_code" = 0 ] || fail "the service exited with $exit_code on SIGTERM (137: killed after the grace period)"
$DOCKER logs "$NAME" 2>&1 | grep -q '"msg":"stopped"' || fail "no \"stopped\" line in the service's log"
$DOCKER start "$NAME" >/dev/null
wait_healthy "$NAME" 90
expect_code 200 "$(api GET "/v1/runs/$RUN2")" "GET /v1/runs/$RUN2"
[ "$(field 'b.status + " " + b.calls[0].status + " " + b.calls[0].attempts')" = "succeeded succeeded 1" ] ||
  fail "after the drain: $(field 'JSON.stringify(b)')"
ok "stopped in ${stop_s} s with exit 0; the 3 s call finished in its one attempt"

step "down/up on the named volume"
$DOCKER rm -f "$NAME" >/dev/null
run_container "$PORT"
wait_healthy "$NAME" 90
expect_code 200 "$(api GET "/v1/runs/$RUN1")" "GET /v1/runs/$RUN1 after down/up"
[ "$(field 'b.status')" = succeeded ] || fail "run $RUN1 after down/up: $(field 'b.status')"
expect_code 200 "$(api GET '/v1/runs?limit=10')" "GET /v1/runs"
[ "$(field 'b.items.length')" = 2 ] || fail "expected the 2 runs in the list, got $(field 'b.items.length')"
ok "a new container on $VOLUME has both runs"
$DOCKER rm -f "$NAME" >/dev/null

step "a root-owned bind mount for /data"
mkdir -p "$WORK/root-owned" && chown 0:0 "$WORK/root-owned" && chmod 755 "$WORK/root-owned"
set +e
out=$(timeout 60 $DOCKER run --rm -e TOOLGRAPH_AGENT_KEY -e TOOLGRAPH_OPERATOR_KEY -v "$WORK/root-owned:/data" \
  -v "$ROOT/examples/docker/toolgraph.yaml:/config/toolgraph.yaml:ro" "$IMAGE" 2>&1)
rc=$?
set -e
[ "$rc" = 1 ] || fail "expected exit 1, got $rc: $out"
printf '%s\n' "$out" | grep -q 'chown 1000:1000' || fail "the message does not say what to do: $out"
ok "refused (exit 1): $(printf '%s\n' "$out" | head -n1)"

# --- 5. docker-compose ---------------------------------------------------------------------------
step "docker-compose up$([ "$WITH_POSTGRES" = 1 ] && echo ' (with postgres)')"
export TOOLGRAPH_PORT
TOOLGRAPH_PORT=$(free_port)
BASE=http://127.0.0.1:$TOOLGRAPH_PORT
# The service's image is toolgraph:latest, built above from the same Dockerfile and context; compose's
# own builder (docker-compose v1's) shares no cache with `docker build` and would compile it all again.
# DOCKER_CI_COMPOSE_BUILD=1 builds through compose too.
if [ "${DOCKER_CI_COMPOSE_BUILD:-0}" = 1 ]; then
  compose build -q >/dev/null 2>"$WORK/compose-build.log" || {
    tail -n 30 "$WORK/compose-build.log"
    fail "docker-compose build"
  }
fi
compose up -d >/dev/null 2>&1 || { compose logs --tail 30; fail "docker-compose up"; }
for svc in $(compose config --services); do
  wait_healthy "$(compose ps -q "$svc")" 120
  ok "$svc healthy"
done
expect_code 201 "$(api POST /v1/runs '{"waitMs":10000,"calls":[{"id":"a","tool":"echo","args":{"x":1}},{"id":"b","tool":"echo","args":{"y":"${a.output.x}"}}]}')" "POST /v1/runs (compose)"
[ "$(field 'b.status + " " + JSON.stringify(b.calls[1].output)')" = 'succeeded {"y":1}' ] || fail "compose run: $(field 'JSON.stringify(b)')"
RUN3=$(field 'b.id')
ok "run $RUN3 succeeded through the compose service on port $TOOLGRAPH_PORT"
if [ "$WITH_POSTGRES" = 1 ]; then
  expect_code 200 "$(api GET /healthz '' "$TOOLGRAPH_OPERATOR_KEY")" "GET /healthz (operator)"
  [ "$(field 'b.store + " " + b.replica')" = "postgres toolgraph-1" ] || fail "the compose service should run on PostgreSQL as toolgraph-1: $(field 'JSON.stringify(b)')"
  ok "on PostgreSQL, replica toolgraph-1"
fi

step "docker-compose down / up"
compose down >/dev/null 2>&1
compose up -d >/dev/null 2>&1 || { compose logs --tail 30; fail "docker-compose up (again)"; }
for svc in $(compose config --services); do wait_healthy "$(compose ps -q "$svc")" 120; done
expect_code 200 "$(api GET "/v1/runs/$RUN3")" "GET /v1/runs/$RUN3 after down/up"
[ "$(field 'b.status')" = succeeded ] || fail "run $RUN3 after down/up: $(field 'b.status')"
ok "run $RUN3 is still there"

# The SQLite backup of docs/operations.md; a compose file whose service uses PostgreSQL backs up with pg_dump instead.
if grep -qE 'postgres(ql)?://' docker-compose.yml; then
  step "backup and restore: skipped (the compose service uses PostgreSQL)"
else
step "backup and restore (docs/operations.md)"
compose exec -T toolgraph node -e "require('better-sqlite3')('/data/toolgraph.db', { readonly: true }).backup('/data/backup.db').then(() => console.log('backup done'))" | grep -q 'backup done' || fail "the online backup"
$DOCKER cp "$(compose ps -q toolgraph)":/data/backup.db "$WORK/toolgraph-backup.db"
ok "online backup: $(($(stat -c %s "$WORK/toolgraph-backup.db") / 1024)) kB"
compose down -v >/dev/null 2>&1
compose up -d >/dev/null 2>&1 || { compose logs --tail 30; fail "docker-compose up (empty volume)"; }
wait_healthy "$(compose ps -q toolgraph)" 120
expect_code 404 "$(api GET "/v1/runs/$RUN3")" "GET /v1/runs/$RUN3 on an empty volume"
compose stop toolgraph >/dev/null 2>&1
$DOCKER run --rm --entrypoint sh -v "${PROJECT}_toolgraph-data:/data" -v "$WORK:/backup:ro" toolgraph:latest \
  -c 'cp /backup/toolgraph-backup.db /data/toolgraph.db && rm -f /data/toolgraph.db-wal /data/toolgraph.db-shm'
compose start toolgraph >/dev/null 2>&1
wait_healthy "$(compose ps -q toolgraph)" 120
expect_code 200 "$(api GET "/v1/runs/$RUN3")" "GET /v1/runs/$RUN3 after the restore"
[ "$(field 'b.status')" = succeeded ] || fail "run $RUN3 after the restore: $(field 'b.status')"
ok "a fresh volume restored from the backup has run $RUN3"
fi

# --- 6. two replicas -----------------------------------------------------------------------------
if [ "$WITH_POSTGRES" = 1 ] && [ -f docker-compose.replicas.yml ]; then
  step "two replicas (docker-compose.replicas.yml)"
  export TOOLGRAPH_PORT_2
  TOOLGRAPH_PORT_2=$(free_port)
  compose2 up -d >/dev/null 2>&1 || { compose2 logs --tail 30; fail "docker-compose up (two replicas)"; }
  for svc in $(compose2 config --services); do wait_healthy "$(compose2 ps -q "$svc")" 120; done
  B1=http://127.0.0.1:$TOOLGRAPH_PORT
  B2=http://127.0.0.1:$TOOLGRAPH_PORT_2
  for pair in "toolgraph-1 $B1" "toolgraph-2 $B2"; do
    BASE=${pair#* }
    expect_code 200 "$(api GET /healthz '' "$TOOLGRAPH_OPERATOR_KEY")" "GET /healthz of ${pair% *}"
    [ "$(field 'b.status + " " + b.store + " " + b.replica + " " + b.cluster.lease')" = "ok postgres ${pair% *} held" ] ||
      fail "${pair% *}: $(field 'JSON.stringify(b)')"
  done
  ok "both answer: toolgraph-1 on port $TOOLGRAPH_PORT, toolgraph-2 on port $TOOLGRAPH_PORT_2, each holding its lease"
  BASE=$B2
  expect_code 201 "$(api POST /v1/runs '{"calls":[{"id":"nap","tool":"sleep","args":{"ms":2500}}]}')" "POST /v1/runs to toolgraph-2"
  RUN4=$(field 'b.id')
  BASE=$B1
  expect_code 200 "$(api GET "/v1/runs/$RUN4")" "GET /v1/runs/$RUN4 through toolgraph-1"
  [ "$(field 'b.status + " " + b.owner')" = "running toolgraph-2" ] || fail "run $RUN4 through toolgraph-1 while it runs: $(field 'JSON.stringify(b)')"
  for _ in $(seq 1 100); do
    expect_code 200 "$(api GET "/v1/runs/$RUN4")" "GET /v1/runs/$RUN4 through toolgraph-1"
    [ "$(field 'b.status')" = running ] || break
    sleep 0.1
  done
  [ "$(field 'b.status + " " + b.calls[0].status + " " + b.owner')" = "succeeded succeeded null" ] || fail "run $RUN4 through toolgraph-1: $(field 'JSON.stringify(b)')"
  expect_code 200 "$(api GET /v1/replicas '' "$TOOLGRAPH_OPERATOR_KEY")" "GET /v1/replicas"
  [ "$(field 'b.items.filter((r) => r.alive).map((r) => r.name).join(" ")')" = "toolgraph-1 toolgraph-2" ] || fail "GET /v1/replicas: $(field 'JSON.stringify(b)')"
  ok "run $RUN4 submitted to toolgraph-2 is read through toolgraph-1 (owner toolgraph-2 while it ran, then succeeded); /v1/replicas lists both alive"
  compose2 down -v >/dev/null 2>&1
else
  compose down -v >/dev/null 2>&1
fi
ok "down -v"
