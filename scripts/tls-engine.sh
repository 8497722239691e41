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

# tlsdocker runs the docker CLI against this engine only, whatever DOCKER_* say.
tlsdocker() {
  env -u DOCKER_CONTEXT -u DOCKER_TLS -u DOCKER_TLS_VERIFY -u DOCKER_CERT_PATH \
    docker --host "tcp://127.0.0.1:$port" --tlsverify \
    --tlscacert "$certs/client/ca.pem" --tlscert "$certs/client/cert.pem" --tlskey "$certs/client/key.pem" "$@"
}
answers() { [ -f "$certs/client/key.pem" ] && tlsdocker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# ourpid prints the pid of our engine when it runs (checked by process name).
ourpid() {
  local pid
  pid=$(cat "$run/dockerd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
    echo "$pid"
  fi
}

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
  if [ "$(id -u)" != 0 ]; then
    log "needs root"; exit 1
  fi
  docker0=$(has_docker0)
  command -v openssl >/dev/null || { log "installing openssl"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null; }
  dockerd=$(command -v dockerd) || { log "dockerd is not installed (scripts/engine.sh installs it)"; exit 1; }

  if [ -n "$(ourpid)" ] && answers; then
    log "engine already up on 127.0.0.1:$port"
  else
    if pid=$(ourpid) && [ -n "$pid" ]; then
      log "engine $pid does not answer: stopping it"
      stop_engine
    fi
    if ss -Hltn "sport = :$port" | grep -q .; then
      log "port $port is taken by something else (set MCP_EXEC_TLSD_PORT)"; exit 1
    fi
    mkdir -p "$run" "$data"
    chmod 700 "$run"
    rm -f "$run/dockerd.pid"
    gencerts
    echo '{}' >"$run/daemon.json"
    # With an address of its own (a /30 of the benchmarking range 198.18.0.0/15),
    # dockerd does not pick a /16 from its pools, which the main engine uses.
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      ip link add "$bridge" type bridge
      ip addr add 198.18.77.1/30 dev "$bridge"
    fi
    ln -sf "$dockerd" "$run/$name"
    log "starting a second dockerd on 127.0.0.1:$port (log: $run/dockerd.log)"
    nohup "$run/$name" \
      --data-root "$data" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" \
      --config-file "$run/daemon.json" --cgroup-parent /mcp-exec-tlsd \
      -H "tcp://127.0.0.1:$port" --tlsverify \
      --tlscacert "$certs/ca.pem" --tlscert "$certs/server-cert.pem" --tlskey "$certs/server-key.pem" \
      --bridge "$bridge" --iptables=false --ip-forward=false --ip-masq=false --userland-proxy=false \
      --log-level warn >"$run/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 1 120); do
      answers && break
      sleep 0.5
    done
    if ! answers; then
      log "it did not answer within 60 s:"; tail -n 20 "$run/dockerd.log" >&2; exit 1
    fi
  fi

  check_docker0 "$docker0"

  want=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || {
    log "the main engine has no $image (run scripts/images.sh)"; exit 1
  }
  have=$(tlsdocker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  if [ "$have" != "$want" ]; then
    log "loading $image into it"
    docker save "$image" | tlsdocker load >/dev/null
  fi
  echo "MCP_EXEC_TEST_TLS_HOST=tcp://127.0.0.1:$port"
  echo "MCP_EXEC_TEST_TLS_CERTS=$certs/client"
}

# The main engine's bridge must survive whatever this engine does.
has_docker0() { if ip link show docker0 >/dev/null 2>&1; then echo yes; else echo no; fi; }
check_docker0() {
  if [ "$1" = yes ] && [ "$(has_docker0)" != yes ]; then
    log "the main engine's docker0 bridge disappeared"; exit 1
  fi
}

stop_engine() {
  local pid
  pid=$(ourpid)
  [ -n "$pid" ] || return 0
  kill -TERM "$pid"
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  log "engine $pid did not stop within 30 s: killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  local docker0
  docker0=$(has_docker0)
  stop_engine
  ip link del "$bridge" 2>/dev/null || true
  check_docker0 "$docker0"
  # Its containerd exits with it; what is left under the exec root is ours only.
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
stop) shift; stop "$@" ;;
*) echo "usage: $0 start | stop [--purge]" >&2; exit 2 ;;
esac
