#!/usr/bin/env bash
# Tests compose.yaml end to end (`make compose-test`, and a step of scripts/test.sh):
# builds both images with compose, starts the server with a random token, waits until
# it is healthy, runs the independent client (scripts/e2e/client.mjs, the TypeScript
# SDK) against it, checks that a wrong or missing token gets 401, restarts it with the
# token as a compose secret instead, then takes it down and checks that no sandbox of
# its instance is left.
#
# Installs docker-compose from Debian's packages when neither `docker-compose` nor
# `docker compose` is there (COMPOSE="docker compose" picks the plugin). Seeds the
# images with scripts/images.sh --server, so it works where no registry is reachable.
# MCP_EXEC_PORT picks the host port (default 8080, or a free one when 8080 is taken).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh
export PATH=$PATH:/usr/local/go/bin

log() { echo "compose-test: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
t_start=$SECONDS
elapsed() { echo "$((SECONDS - t_start)) s"; }

bash scripts/engine.sh
sock=/var/run/docker.sock
if [ -n "${DOCKER_HOST:-}" ] && [ "$DOCKER_HOST" != "unix://$sock" ]; then
  fail "DOCKER_HOST=$DOCKER_HOST: compose.yaml mounts the local socket $sock"
fi

# --- tools -------------------------------------------------------------------------
if [ -z "${COMPOSE:-}" ]; then
  if command -v docker-compose >/dev/null 2>&1; then
    COMPOSE=docker-compose
  elif docker compose version >/dev/null 2>&1; then
    COMPOSE="docker compose"
  else
    log "installing docker-compose"
    apt_get update -qq
    apt_get install -y -qq docker-compose >/dev/null
    COMPOSE=docker-compose
  fi
fi
log "using $COMPOSE ($($COMPOSE version 2>/dev/null | head -n 1))"
command -v node >/dev/null 2>&1 || fail "node not found: install Node.js 20 or later"
if [ ! -f scripts/e2e/node_modules/@modelcontextprotocol/sdk/package.json ]; then
  log "npm ci in scripts/e2e"
  (cd scripts/e2e && npm ci --no-audit --no-fund >/dev/null)
fi

# --- images ------------------------------------------------------------------------
# The server image is built here once (through the Go module proxy, with the host's Go
# seeded as the toolchain image where golang:1.26-trixie cannot be pulled); the
# `up --build` below then finds every layer in the cache.
export MCP_EXEC_VERSION=${MCP_EXEC_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
bash scripts/images.sh --server
MCP_EXEC_GO_IMAGE=$(bash scripts/images.sh --go-image)
export MCP_EXEC_GO_IMAGE
log "images ready after $(elapsed)"

# --- settings ----------------------------------------------------------------------
free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -z "${MCP_EXEC_PORT:-}" ]; then
  MCP_EXEC_PORT=8080
  if port_busy 8080; then
    MCP_EXEC_PORT=$(free_port)
    log "8080 is taken: using port $MCP_EXEC_PORT"
  fi
fi
export MCP_EXEC_PORT
export DOCKER_GID=${DOCKER_GID:-$(stat -c %g "$sock")}
export MCP_EXEC_INSTANCE=compose-test-$$
export MCP_EXEC_AUTH_TOKEN
MCP_EXEC_AUTH_TOKEN=$(openssl rand -hex 32)
export MCP_EXEC_AUTH_TOKEN_FILE="" MCP_EXEC_TOKEN_SECRET=""
project=mcpexec-compose-test-$$
dc() { $COMPOSE -p "$project" -f compose.yaml "$@"; }
url=http://127.0.0.1:$MCP_EXEC_PORT
tmp=$(mktemp -d)

cleanup() {
  local rc=$?
  trap - EXIT
  if [ "$rc" != 0 ]; then
    log "logs of the failed run:"
    dc logs --no-color --tail 80 >&2 || true
  fi
  dc down --remove-orphans --timeout 40 >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

# wait_healthy waits for the server's container to report healthy.
wait_healthy() {
  local id status=""
  for _ in $(seq 1 180); do
    id=$(dc ps -q mcp-exec 2>/dev/null || true)
    if [ -n "$id" ]; then
      status=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id" 2>/dev/null || true)
      [ "$status" = healthy ] && return 0
    fi
    sleep 1
  done
  fail "mcp-exec not healthy after 180 s (status ${status:-none})"
}

# status METHOD PATH [TOKEN]: the HTTP status of a request (an initialize for POST).
status() {
  local args=(-s -o /dev/null -w '%{http_code}' --max-time 10 -X "$1"
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
  [ "$#" -ge 3 ] && args+=(-H "X-MCP-AUTH: $3")
  [ "$1" = POST ] && args+=(--data '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"compose-test","version":"1"}}}')
  curl "${args[@]}" "$url$2" || true
}

expect_status() { # WANT DESCRIPTION METHOD PATH [TOKEN]
  local want=$1 what=$2 got
  shift 2
  got=$(status "$@")
  [ "$got" = "$want" ] || fail "$what: HTTP $got, want $want"
  log "ok: $what: HTTP $got"
}

# --- up with the token in the environment --------------------------------------------
t0=$SECONDS
log "up --build (project $project, port $MCP_EXEC_PORT, socket group $DOCKER_GID)"
dc up -d --build >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; fail "up failed"; }
wait_healthy
log "healthy $((SECONDS - t0)) s after up (total $(elapsed))"

id=$(dc ps -q mcp-exec)
hardening=$(docker inspect -f '{{.Config.User}} ro={{.HostConfig.ReadonlyRootfs}} caps={{.HostConfig.CapDrop}} sec={{.HostConfig.SecurityOpt}} groups={{.HostConfig.GroupAdd}} restart={{.HostConfig.RestartPolicy.Name}} ports={{json .HostConfig.PortBindings}}' "$id")
log "container: $hardening"
for want in "65532:65532" "ro=true" "caps=[ALL]" "no-new-privileges" "groups=[$DOCKER_GID]" "restart=unless-stopped" '"HostIp":"127.0.0.1"'; do
  case "$hardening" in *"$want"*) ;; *) fail "container lacks $want" ;; esac
done
docker exec "$id" mcp-exec healthcheck || fail "mcp-exec healthcheck in the container failed"
# The server verifies TLS to upstreams, an OAuth issuer and an inject rule's real host
# against the system trust store: the image must carry Debian's bundle (Go reads it there).
certs=$(docker exec "$id" sh -c 'grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt' 2>/dev/null || echo 0)
[ "$certs" -gt 100 ] || fail "the server image has no system trust store ($certs certificates in /etc/ssl/certs/ca-certificates.crt)"

log "client.mjs battery through $url/mcp"
node scripts/e2e/client.mjs --transport http --url "$url/mcp" --token "$MCP_EXEC_AUTH_TOKEN" >"$tmp/client.json" 2>"$tmp/client.err" \
  || { cat "$tmp/client.err" >&2; fail "client.mjs failed: $(cat "$tmp/client.json")"; }
grep -q '"ok":true' "$tmp/client.json" || fail "client.mjs did not report ok: $(cat "$tmp/client.json")"
grep -E 'PASS|FAIL|OK' "$tmp/client.err" >&2 || true

expect_status 401 "initialize with a wrong token" POST /mcp "wrong-$MCP_EXEC_AUTH_TOKEN"
expect_status 401 "initialize without a token" POST /mcp
expect_status 200 "initialize with the token" POST /mcp "$MCP_EXEC_AUTH_TOKEN"
expect_status 200 "/healthz without a token" GET /healthz
dc logs --no-color mcp-exec 2>/dev/null | grep -qF "$MCP_EXEC_AUTH_TOKEN" && fail "the server logged its token"

# --- the token as a compose secret instead -------------------------------------------
t0=$SECONDS
secret_token=$(openssl rand -hex 32)
printf '%s\n' "$secret_token" >"$tmp/token"
# The secret is a bind mount of the file: user 65532 must be able to read it.
if [ "$(id -u)" = 0 ]; then chown 65532 "$tmp/token"; chmod 0400 "$tmp/token"; else chmod 0644 "$tmp/token"; fi
old_token=$MCP_EXEC_AUTH_TOKEN
MCP_EXEC_AUTH_TOKEN="" MCP_EXEC_TOKEN_SECRET=$tmp/token MCP_EXEC_AUTH_TOKEN_FILE=/run/secrets/mcp_exec_token \
  dc up -d >"$tmp/up2.log" 2>&1 || { cat "$tmp/up2.log" >&2; fail "up with the secret failed"; }
sleep 2 # let compose replace the container before asking for its health
wait_healthy
log "recreated with the secret, healthy after $((SECONDS - t0)) s"
expect_status 200 "initialize with the secret's token" POST /mcp "$secret_token"
expect_status 401 "initialize with the earlier environment token" POST /mcp "$old_token"

# --- down ----------------------------------------------------------------------------
t0=$SECONDS
dc down --remove-orphans --timeout 40 >"$tmp/down.log" 2>&1 || { cat "$tmp/down.log" >&2; fail "down failed"; }
log "down in $((SECONDS - t0)) s"
left=$(docker ps -aq --filter "label=dev.mcp-exec.instance=$MCP_EXEC_INSTANCE" | wc -l)
[ "$left" = 0 ] || { docker ps -a --filter "label=dev.mcp-exec.instance=$MCP_EXEC_INSTANCE" >&2; fail "$left sandbox containers of $MCP_EXEC_INSTANCE left behind"; }
# Only containers compose created carry a config hash: the compose plugin labels the
# images it builds with the project's name, and the sandboxes inherit those labels.
left=$(docker ps -aq --filter "label=com.docker.compose.project=$project" --filter label=com.docker.compose.config-hash | wc -l)
[ "$left" = 0 ] || fail "$left containers of project $project left behind"
log "PASS in $(elapsed): no container left"
