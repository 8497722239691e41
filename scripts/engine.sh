#!/usr/bin/env bash
# Makes sure a Docker engine answers on this machine, idempotently:
# installs docker.io from Debian's packages when dockerd is missing, and starts dockerd
# when nothing answers (removing a stale pid file first, which a killed dockerd leaves).
# With DOCKER_HOST set to anything but the default socket, it only checks.
set -euo pipefail
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"

log() { echo "engine: $*" >&2; }

engine_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if engine_answers; then
  log "engine answers (server $(docker version --format '{{.Server.Version}}'))"
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix:///var/run/docker.sock" ]; then
  log "DOCKER_HOST=${DOCKER_HOST} does not answer; not starting a local engine"
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    log "dockerd is not installed; run as root or install docker.io"
    exit 1
  fi
  log "installing docker.io"
  apt_get update -qq
  apt_get install -y -qq docker.io >/dev/null
fi
if ! command -v docker >/dev/null 2>&1; then
  log "no docker CLI found"
  exit 1
fi

if [ "$(id -u)" != 0 ]; then
  log "no engine answers and starting dockerd needs root"
  exit 1
fi

# A dockerd that is still shutting down holds the pid file: wait for it to go.
for _ in $(seq 1 120); do
  pgrep -x dockerd >/dev/null 2>&1 || break
  if engine_answers; then
    log "engine answers"
    exit 0
  fi
  sleep 0.5
done

if [ -f /var/run/docker.pid ]; then
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    log "removing stale /var/run/docker.pid"
    rm -f /var/run/docker.pid
  fi
fi
# containerd may have been left with a stale pid file too.
rm -f /var/run/docker/containerd/containerd.pid 2>/dev/null || true

logfile=${MCP_EXEC_DOCKERD_LOG:-/var/log/mcp-exec-dockerd.log}
log "starting dockerd (log: $logfile)"
nohup dockerd >"$logfile" 2>&1 </dev/null &

for _ in $(seq 1 120); do
  if engine_answers; then
    log "engine up (server $(docker version --format '{{.Server.Version}}'))"
    exit 0
  fi
  sleep 0.5
done
log "dockerd did not answer within 60 s; last lines of $logfile:"
tail -n 20 "$logfile" >&2 || true
exit 1
