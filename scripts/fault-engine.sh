#!/usr/bin/env bash
# A private dockerd on a unix socket, for the engine-restart tests (TestEngineRestart*):
# they stop and start it in the middle of calls, which they must never do to the main
# engine that other tests share. Like tls-engine.sh it never touches the main engine:
# its own data root, exec root, pid file, configuration file, cgroup parent and socket
# (/run/mcp-exec-faults/engine.sock); a bridge of its own with a fixed /30 (mcpx-flt0,
# 198.18.78.1; `--bridge none` would make dockerd delete the main engine's docker0, and
# without an address it would take a /16 from the pools the main engine uses), no
# iptables, no IP forwarding; and its own process name (mcp-exec-faultd, a symlink to
# dockerd), so `pgrep -x dockerd` never sees it. The sandboxes need no bridge: their
# network mode is none.
#
#   fault-engine.sh start   starts the engine (or reuses the running one), loads the
#                           sandbox image from the main engine when it differs, and
#                           prints for `eval`: MCP_EXEC_TEST_FAULT_HOST=unix://SOCKET
#   fault-engine.sh down    stops the engine (SIGTERM, as a service manager's restart
#                           does) and waits until it has exited; keeps everything else
#   fault-engine.sh up      starts it again after `down` and waits until it answers
#   fault-engine.sh stop    stops it and removes its bridge and run-time directory; the
#                           data root is kept so the image need not be loaded again
#                           (stop --purge removes it too)
#
# Root only. MCP_EXEC_FAULTD_DATA (default /var/lib/mcp-exec-faultd).
set -euo pipefail
cd "$(dirname "$0")/.."

data=${MCP_EXEC_FAULTD_DATA:-/var/lib/mcp-exec-faultd}
run=/run/mcp-exec-faults
name=mcp-exec-faultd
sock=$run/engine.sock
bridge=mcpx-flt0
image=$(cat images/python-sandbox/TAG)

log() { echo "fault-engine: $*" >&2; }

fdocker() { env -u DOCKER_CONTEXT -u DOCKER_TLS -u DOCKER_TLS_VERIFY -u DOCKER_CERT_PATH docker --host "unix://$sock" "$@"; }
answers() { [ -S "$sock" ] && fdocker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# ourpid prints the pid of our engine when it runs (checked by process name).
ourpid() {
  local pid
  pid=$(cat "$run/dockerd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
    echo "$pid"
  fi
}

has_docker0() { if ip link show docker0 >/dev/null 2>&1; then echo yes; else echo no; fi; }
check_docker0() {
  if [ "$1" = yes ] && [ "$(has_docker0)" != yes ]; then
    log "the main engine's docker0 bridge disappeared"; exit 1
  fi
}

up() {
  if [ "$(id -u)" != 0 ]; then
    log "needs root"; exit 1
  fi
  local docker0 dockerd
  docker0=$(has_docker0)
  dockerd=$(command -v dockerd) || { log "dockerd is not installed (scripts/engine.sh installs it)"; exit 1; }
  if [ -n "$(ourpid)" ] && answers; then
    return 0
  fi
  if [ -n "$(ourpid)" ]; then
    log "engine $(ourpid) does not answer: stopping it"
    down
  fi
  mkdir -p "$run" "$data"
  chmod 700 "$run"
  rm -f "$run/dockerd.pid" "$sock"
  echo '{}' >"$run/daemon.json"
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add 198.18.78.1/30 dev "$bridge"
  fi
  ln -sf "$dockerd" "$run/$name"
  nohup "$run/$name" \
    --data-root "$data" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" \
    --config-file "$run/daemon.json" --cgroup-parent /mcp-exec-faultd \
    -H "unix://$sock" \
    --bridge "$bridge" --iptables=false --ip-forward=false --ip-masq=false --userland-proxy=false \
    --log-level warn >>"$run/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 1 240); do
    answers && break
    sleep 0.25
  done
  if ! answers; then
    log "it did not answer within 60 s:"; tail -n 20 "$run/dockerd.log" >&2; exit 1
  fi
  check_docker0 "$docker0"
}

start() {
  up
  local want have
  want=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || {
    log "the main engine has no $image (run scripts/images.sh)"; exit 1
  }
  have=$(fdocker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  if [ "$have" != "$want" ]; then
    log "loading $image into it"
    docker save "$image" | fdocker load >/dev/null
  fi
  echo "MCP_EXEC_TEST_FAULT_HOST=unix://$sock"
}

down() {
  local pid
  pid=$(ourpid)
  [ -n "$pid" ] || return 0
  kill -TERM "$pid"
  for _ in $(seq 1 120); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.25
  done
  log "engine $pid did not stop within 30 s: killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  local docker0
  docker0=$(has_docker0)
  down
  ip link del "$bridge" 2>/dev/null || true
  check_docker0 "$docker0"
  if [ -d "$run" ]; then
    umount -R "$run/exec" 2>/dev/null || true
    rm -rf "$run"
  fi
  if [ "${1:-}" = --purge ] && [ -d "$data" ]; then
    rm -rf "$data"
  fi
  log "stopped"
}

case "${1:-}" in
start) start ;;
up) up ;;
down) down ;;
stop) shift; stop "$@" ;;
*) echo "usage: $0 start | down | up | stop [--purge]" >&2; exit 2 ;;
esac
