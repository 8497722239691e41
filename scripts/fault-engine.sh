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
# shellcheck source=scripts/lib/dockerd.sh
. scripts/lib/dockerd.sh

fdocker() { env -u DOCKER_CONTEXT -u DOCKER_TLS -u DOCKER_TLS_VERIFY -u DOCKER_CERT_PATH docker --host "unix://$sock" "$@"; }
answers() { [ -S "$sock" ] && fdocker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

up() {
  needs_root
  local docker0
  docker0=$(has_docker0)
  if [ -n "$(dockerd_pid)" ] && answers; then
    return 0
  fi
  if [ -n "$(dockerd_pid)" ]; then
    log "engine $(dockerd_pid) does not answer: stopping it"
    down
  fi
  rm -f "$sock"
  dockerd_start 198.18.78.1/30 -H "unix://$sock"
  check_docker0 "$docker0"
}

start() {
  up
  dockerd_load_image fdocker
  echo "MCP_EXEC_TEST_FAULT_HOST=unix://$sock"
}

down() { stop_pid "$(dockerd_pid)" 30; }

case "${1:-}" in
start) start ;;
up) up ;;
down) down ;;
stop) shift; dockerd_stop "$@" ;;
*) echo "usage: $0 start | down | up | stop [--purge]" >&2; exit 2 ;;
esac
