#!/usr/bin/env bash
# Remote engines, for real (docs/engines.md, "Remote engines"): starts a second dockerd
# on 127.0.0.1 with mutual TLS (tls-engine.sh) and an sshd on 127.0.0.1 in front of the
# main engine (ssh-engine.sh), runs the remoteengine-tagged tests and the server binary
# against them, and stops both, whatever happened. Part of scripts/test.sh; root only.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

log() { echo "remote-test: $*" >&2; }

docker0=no
ip link show docker0 >/dev/null 2>&1 && docker0=yes

cleanup() {
  local rc=$?
  bash scripts/tls-engine.sh stop || rc=1
  bash scripts/ssh-engine.sh stop || rc=1
  if [ "$docker0" = yes ] && ! ip link show docker0 >/dev/null 2>&1; then
    log "the main engine's docker0 bridge is gone"; rc=1
  fi
  exit $rc
}
trap cleanup EXIT

# Variables for the tests (MCP_EXEC_TEST_TLS_*, MCP_EXEC_TEST_SSH_*).
eval "$(bash scripts/tls-engine.sh start)"
eval "$(bash scripts/ssh-engine.sh start)"
export MCP_EXEC_TEST_TLS_HOST MCP_EXEC_TEST_TLS_CERTS \
  MCP_EXEC_TEST_SSH_HOST MCP_EXEC_TEST_SSH_CONFIG MCP_EXEC_TEST_SSH_CONFIG_UNKNOWN

export CI=${CI:-}
go test -race -count=1 -tags remoteengine -timeout 10m \
  -run '^(TestTLSEngineLive|TestSSHEngineLive)$' ./launcher/engine

# The server itself over TLS: one program, and the start-up log names the engine.
bin=$(mktemp -d)/mcp-exec
go build -o "$bin" ./cmd/mcp-exec
out=$(echo 'print(6 * 7)' | env DOCKER_HOST="$MCP_EXEC_TEST_TLS_HOST" DOCKER_TLS_VERIFY=1 \
  DOCKER_CERT_PATH="$MCP_EXEC_TEST_TLS_CERTS" MCP_EXEC_INSTANCE=test-remote-tls-run MCP_EXEC_POOL_SIZE=0 \
  MCP_EXEC_LOG_FORMAT=json "$bin" run - 2>"$bin.log") || { cat "$bin.log" >&2; exit 1; }
if [ "$out" != 42 ] ||
  ! grep -q '"engine":"Docker Engine [^"]*","engine_host":"'"$MCP_EXEC_TEST_TLS_HOST"'"' "$bin.log"; then
  log "mcp-exec run over TLS printed '$out'; its log:"; cat "$bin.log" >&2; exit 1
fi
log "mcp-exec run over TLS: $(grep -o '"engine":"[^"]*","engine_host":"[^"]*"' "$bin.log")"
rm -rf "$(dirname "$bin")"
