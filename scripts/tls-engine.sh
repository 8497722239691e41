#!/usr/bin/env bash
# A second dockerd listening on 127.0.0.1 with mutual TLS, for the remote-engine tests
# (launcher/remote_live_test.go). It never touches the main engine: its own data root,
# exec root, pid file, configuration file and cgroup parent; no unix socket; a bridge
# of its own (mcpx-tls0; `--bridge none` would make dockerd delete the main engine's
# docker0), no iptables, no IP forwarding; and it runs under its own process name
# (mcp-exec-tlsd, a symlink to dockerd), so `pgrep -x dockerd` / `pkill -x dockerd`
# (engine.sh, the engine-restart test) never see it.
#
#   tls-engine.sh start   generates a CA, a server and a client certificate, starts the
#                         engine (or reuses the running one), loads the sandbox image
#                         from the main engine when it differs, and prints for `eval`:
#                         MCP_EXEC_TEST_TLS_HOST (tcp://127.0.0.1:PORT) and
#                         MCP_EXEC_TEST_TLS_CERTS (a directory with ca.pem, cert.pem,
#                         key.pem: what DOCKER_CERT_PATH takes)
#   tls-engine.sh stop    stops it and removes its run-time directory (certificates,
#                         exec root); the data root is kept so the image need not be
#                         loaded again (stop --purge removes it too)
#
# Root only. MCP_EXEC_TLSD_PORT (default 23760), MCP_EXEC_TLSD_DATA (default
# /var/lib/mcp-exec-tlsd).
set -euo pipefail
cd "$(dirname "$0")/.."

port=${MCP_EXEC_TLSD_PORT:-23760}
data=${MCP_EXEC_TLSD_DATA:-/var/lib/mcp-exec-tlsd}
run=/run/mcp-exec-tlsd
name=mcp-exec-tlsd
certs=$run/certs
bridge=mcpx-tls0
image=$(cat images/python-sandbox/TAG)

log() { echo "tls-engine: $*" >&2; }
# shellcheck source=scripts/lib/dockerd.sh
. scripts/lib/dockerd.sh
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh

# tlsdocker runs the docker CLI against this engine only, whatever DOCKER_* say.
tlsdocker() {
  env -u DOCKER_CONTEXT -u DOCKER_TLS -u DOCKER_TLS_VERIFY -u DOCKER_CERT_PATH \
    docker --host "tcp://127.0.0.1:$port" --tlsverify \
    --tlscacert "$certs/client/ca.pem" --tlscert "$certs/client/cert.pem" --tlskey "$certs/client/key.pem" "$@"
}
answers() { [ -f "$certs/client/key.pem" ] && tlsdocker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

gencerts() {
  rm -rf "$certs"
  mkdir -p "$certs/client"
  chmod 700 "$certs"
  (
    cd "$certs"
    ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
    openssl req -x509 "${ec[@]}" -keyout ca-key.pem -out ca.pem -days 2 \
      -subj "/CN=mcp-exec test CA" 2>/dev/null
    openssl req "${ec[@]}" -keyout server-key.pem -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
      -out server-cert.pem -days 2 -extfile server.ext 2>/dev/null
    openssl req "${ec[@]}" -keyout client/key.pem -out client.csr -subj "/CN=mcp-exec test client" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
      -out client/cert.pem -days 2 -extfile client.ext 2>/dev/null
    cp ca.pem client/ca.pem
    rm -f ./*.csr ./*.ext ./*.srl
    chmod 600 ./*key.pem client/key.pem
  )
}

start() {
  needs_root
  local docker0 pid
  docker0=$(has_docker0)
  command -v openssl >/dev/null || { log "installing openssl"; apt_get install -y -qq openssl >/dev/null; }

  if [ -n "$(dockerd_pid)" ] && answers; then
    log "engine already up on 127.0.0.1:$port"
  else
    if pid=$(dockerd_pid) && [ -n "$pid" ]; then
      log "engine $pid does not answer: stopping it"
      stop_pid "$pid" 30
    fi
    if ss -Hltn "sport = :$port" | grep -q .; then
      log "port $port is taken by something else (set MCP_EXEC_TLSD_PORT)"; exit 1
    fi
    mkdir -p "$run"
    chmod 700 "$run"
    gencerts
    log "starting a second dockerd on 127.0.0.1:$port (log: $run/dockerd.log)"
    dockerd_start 198.18.77.1/30 -H "tcp://127.0.0.1:$port" --tlsverify \
      --tlscacert "$certs/ca.pem" --tlscert "$certs/server-cert.pem" --tlskey "$certs/server-key.pem"
  fi
  check_docker0 "$docker0"
  dockerd_load_image tlsdocker
  echo "MCP_EXEC_TEST_TLS_HOST=tcp://127.0.0.1:$port"
  echo "MCP_EXEC_TEST_TLS_CERTS=$certs/client"
}

case "${1:-}" in
start) start ;;
stop) shift; dockerd_stop "$@" ;;
*) echo "usage: $0 start | stop [--purge]" >&2; exit 2 ;;
esac
