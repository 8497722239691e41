# shellcheck shell=bash disable=SC2154 # run, name, data, bridge, image: set by the caller
# Sourced by the scripts that run a daemon of their own beside the main engine:
# fault-engine.sh and tls-engine.sh (a private dockerd each) and ssh-engine.sh (an
# sshd). A daemon is ours when the pid in its pid file runs under our process name,
# so nothing here ever signals the main engine or the system's sshd.
#
# The caller defines log (messages to stderr) and, for the dockerd functions,
# answers (the engine answers its CLI), and sets run (the run-time directory),
# name (the process name, a symlink to dockerd, also its cgroup parent), data (the
# data root), bridge (its own bridge) and image (the sandbox image).

# pid_named FILE COMM prints the pid FILE holds when that process runs as COMM.
pid_named() {
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; then
    echo "$pid"
  fi
}

# wait_for SECONDS COMMAND... runs COMMAND every 0.25 s until it succeeds (0) or
# SECONDS have passed (1).
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.25
  done
}

gone() { ! kill -0 "$1" 2>/dev/null; }

# stop_pid PID SECONDS sends SIGTERM (as a service manager does), waits until the
# process has exited, and kills it when it has not within SECONDS. No PID: nothing.
stop_pid() {
  [ -n "$1" ] || return 0
  kill -TERM "$1"
  wait_for "$2" gone "$1" && return 0
  log "$1 did not stop within $2 s: killing it"
  kill -KILL "$1" 2>/dev/null || true
}

# The main engine's bridge must survive whatever a private engine does.
has_docker0() { if ip link show docker0 >/dev/null 2>&1; then echo yes; else echo no; fi; }
check_docker0() {
  if [ "$1" = yes ] && [ "$(has_docker0)" != yes ]; then
    log "the main engine's docker0 bridge disappeared"; exit 1
  fi
}

needs_root() {
  if [ "$(id -u)" != 0 ]; then
    log "needs root"; exit 1
  fi
}

dockerd_pid() { pid_named "$run/dockerd.pid" "$name"; }

# dockerd_start CIDR ARG... starts our dockerd (the run-time directory must hold
# what ARG names, e.g. certificates) and waits up to 60 s until it answers. Its
# bridge gets the address CIDR (a /30 of the benchmarking range 198.18.0.0/15):
# with an address of its own dockerd does not pick a /16 from its pools, which the
# main engine uses, and `--bridge none` would make it delete the main engine's
# docker0. No iptables, no IP forwarding: the sandboxes' network mode is none.
dockerd_start() {
  local cidr=$1 dockerd
  shift
  dockerd=$(command -v dockerd) || { log "dockerd is not installed (scripts/engine.sh installs it)"; exit 1; }
  mkdir -p "$run" "$data"
  chmod 700 "$run"
  rm -f "$run/dockerd.pid"
  echo '{}' >"$run/daemon.json"
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$cidr" dev "$bridge"
  fi
  ln -sf "$dockerd" "$run/$name"
  nohup "$run/$name" \
    --data-root "$data" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" \
    --config-file "$run/daemon.json" --cgroup-parent "/$name" "$@" \
    --bridge "$bridge" --iptables=false --ip-forward=false --ip-masq=false --userland-proxy=false \
    --log-level warn >>"$run/dockerd.log" 2>&1 </dev/null &
  if ! wait_for 60 answers; then
    log "it did not answer within 60 s:"; tail -n 20 "$run/dockerd.log" >&2; exit 1
  fi
}

# dockerd_load_image CLI loads the sandbox image from the main engine into ours
# (CLI runs the docker CLI against ours) when ours lacks it or has another.
dockerd_load_image() {
  local want have
  want=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || {
    log "the main engine has no $image (run scripts/images.sh)"; exit 1
  }
  have=$("$1" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  if [ "$have" != "$want" ]; then
    log "loading $image into it"
    docker save "$image" | "$1" load >/dev/null
  fi
}

# dockerd_stop [--purge] stops our dockerd and removes its bridge and run-time
# directory; the data root is kept (the image need not be loaded again) unless
# --purge.
dockerd_stop() {
  local docker0
  docker0=$(has_docker0)
  stop_pid "$(dockerd_pid)" 30
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
