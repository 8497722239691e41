#!/usr/bin/env bash
# An sshd on 127.0.0.1 through which the remote-engine tests reach the main engine with
# DOCKER_HOST=ssh://root@127.0.0.1:PORT (launcher/remote_live_test.go). Everything it
# uses is generated for it and lives in /run/mcp-exec-test-sshd: a host key, a client
# key (the only one in its authorized_keys), its configuration, and a client
# configuration whose known_hosts file holds that host key, so ssh checks the host key
# as usual and never prompts.
#
#   ssh-engine.sh start   installs openssh-server when sshd is missing (without
#                         starting the system's sshd), starts this sshd (or reuses it),
#                         and prints for `eval`: MCP_EXEC_TEST_SSH_HOST,
#                         MCP_EXEC_TEST_SSH_CONFIG (the client configuration) and
#                         MCP_EXEC_TEST_SSH_CONFIG_UNKNOWN (the same with an empty
#                         known_hosts file, for the host key refusal test)
#   ssh-engine.sh stop    stops it and removes the directory
#
# Root only. MCP_EXEC_SSHD_PORT (default 23722).
set -euo pipefail

port=${MCP_EXEC_SSHD_PORT:-23722}
run=/run/mcp-exec-test-sshd

log() { echo "ssh-engine: $*" >&2; }
# shellcheck source=scripts/lib/dockerd.sh
. "$(dirname "$0")/lib/dockerd.sh"
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"

ourpid() { pid_named "$run/sshd.pid" sshd; }

answers() {
  [ -f "$run/ssh_config" ] &&
    ssh -F "$run/ssh_config" -p "$port" root@127.0.0.1 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

install_sshd() {
  [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null && return 0
  log "installing openssh-server"
  # Keep the package's scripts from starting the system's sshd on port 22.
  local guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    guard=1
  fi
  local rc=0
  { apt_get install -y -qq openssh-server >/dev/null 2>&1 ||
    { apt_get update -qq && apt_get install -y -qq openssh-server >/dev/null; }; } || rc=$?
  [ -n "$guard" ] && rm -f /usr/sbin/policy-rc.d
  return $rc
}

start() {
  needs_root
  install_sshd
  if [ -n "$(ourpid)" ] && answers; then
    log "sshd already up on 127.0.0.1:$port"
  else
    stop_pid "$(ourpid)" 10
    if ss -Hltn "sport = :$port" | grep -q .; then
      log "port $port is taken by something else (set MCP_EXEC_SSHD_PORT)"; exit 1
    fi
    rm -rf "$run"
    mkdir -p "$run" /run/sshd
    chmod 700 "$run"
    ssh-keygen -q -t ed25519 -N '' -C mcp-exec-test-host -f "$run/host_ed25519"
    ssh-keygen -q -t ed25519 -N '' -C mcp-exec-test-client -f "$run/client_ed25519"
    # restrict: no terminal, no forwarding of any kind; commands still run.
    echo "restrict $(cat "$run/client_ed25519.pub")" >"$run/authorized_keys"
    echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$run/host_ed25519.pub")" >"$run/known_hosts"
    : >"$run/known_hosts_empty"
    cat >"$run/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $run/host_ed25519
PidFile $run/sshd.pid
AuthorizedKeysFile $run/authorized_keys
AllowUsers root
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitTunnel no
EOF
    for cfg in ssh_config:known_hosts ssh_config_unknown:known_hosts_empty; do
      cat >"$run/${cfg%%:*}" <<EOF
Host 127.0.0.1
  User root
  IdentityFile $run/client_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $run/${cfg#*:}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  BatchMode yes
EOF
    done
    /usr/sbin/sshd -t -f "$run/sshd_config"
    /usr/sbin/sshd -f "$run/sshd_config" -E "$run/sshd.log"
    if ! wait_for 10 answers; then
      log "sshd does not let the client key run docker:"; tail -n 20 "$run/sshd.log" >&2 || true; exit 1
    fi
    log "sshd up on 127.0.0.1:$port"
  fi
  echo "MCP_EXEC_TEST_SSH_HOST=ssh://root@127.0.0.1:$port"
  echo "MCP_EXEC_TEST_SSH_CONFIG=$run/ssh_config"
  echo "MCP_EXEC_TEST_SSH_CONFIG_UNKNOWN=$run/ssh_config_unknown"
}

stop() {
  # The listener only: sessions end with their connections (the tests close theirs).
  stop_pid "$(ourpid)" 10
  rm -rf "$run"
  log "stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start | stop" >&2; exit 2 ;;
esac
