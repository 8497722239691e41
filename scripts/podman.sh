#!/usr/bin/env bash
# Makes sure a Podman engine serves the Docker-compatible API on this machine, with the
# sandbox image loaded, idempotently, and prints the DOCKER_HOST to use on stdout
# (everything else goes to stderr):
#
#   eval "$(bash scripts/podman.sh)"                 # rootful: /run/podman/podman.sock
#   eval "$(bash scripts/podman.sh --rootless)"      # rootless, as user mcp-exec-rootless
#
# Rootful (as root):
#   - installs podman from Debian's packages when missing;
#   - writes /etc/containers/containers.conf.d/50-mcp-exec.conf: default_ulimits (podman
#     otherwise raises RLIMIT_NOFILE/NPROC above what a host without CAP_SYS_RESOURCE
#     allows, and every container fails), an /etc/hosts without the host's entries and
#     without host.containers.internal, and runtime "runc" when crun cannot run a
#     container here (crun refuses hybrid cgroup v1 hosts) or is not installed;
#   - starts `podman system service --time=0 unix:///run/podman/podman.sock` in the
#     background when the socket does not answer (removing a stale socket), restarting
#     it when this script changed its configuration;
#   - loads the sandbox image (`docker save IMAGE | podman load`) when podman lacks it
#     or holds another build of it than Docker.
#
# --stop-service stops the rootful service this script started (its pid file) and waits
# until it has exited, as a service manager's restart would; running the script again
# starts it. The engine-restart test (scripts/test.sh) uses the pair; containers keep
# running meanwhile (conmon holds them), only the API goes away. scripts/test.sh also
# calls it when the Podman steps are done, and `--stop-service --rootless` after the
# rootless one (which also ends the rootless user's other processes: podman's pause
# process), so that no service of ours outlives the tests.
#
# --rootless does the same configuration and image steps (the configuration applies to
# rootless podman too), and additionally creates the user $MCP_EXEC_ROOTLESS_USER (mcp-exec-rootless)
# with subordinate uid/gid ranges, and does the service and image steps as that user,
# with XDG_RUNTIME_DIR=/run/user/<uid> and native overlay storage. On cgroup v1 a rootless podman silently drops
# memory, pids and CPU limits: mcp-exec refuses to serve there (VerifyLimits), see
# docs/engines.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh

log() { echo "podman: $*" >&2; }
die() { log "$*"; exit 1; }

mode=rootful
case "${1:-} ${2:-}" in
  " ") ;;
  "--rootless ") mode=rootless ;;
  "--stop-service ") mode=stop ;;
  "--stop-service --rootless") mode=stop-rootless ;;
  *) die "usage: $0 [--rootless | --stop-service [--rootless]]" ;;
esac
ruser=${MCP_EXEC_ROOTLESS_USER:-mcp-exec-rootless}

# stop_service PIDFILE: stops the service recorded there if it is still the one this script
# started (not a reused pid) and waits until it has gone.
stop_service() {
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'podman system service'; then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "the service ($pid) did not stop within 10 s: killing it"; kill -KILL "$pid" 2>/dev/null || true
    fi
    log "service $pid stopped"
  fi
  rm -f "$1"
}
if [ "$mode" = stop ]; then
  stop_service /run/podman/mcp-exec-service.pid
  exit 0
fi
# --stop-service --rootless: the rootless service, then whatever else runs as the user this
# script created for it (podman's pause process, which holds the user namespace): the user
# is ours alone, so nothing of it outlives the tests.
if [ "$mode" = stop-rootless ]; then
  ruid=$(id -u "$ruser" 2>/dev/null) || exit 0
  stop_service "/run/user/$ruid/mcp-exec-service.pid"
  if pgrep -u "$ruid" >/dev/null; then
    pkill -TERM -u "$ruid" || true
    for _ in $(seq 1 50); do pgrep -u "$ruid" >/dev/null || break; sleep 0.1; done
    pkill -KILL -u "$ruid" 2>/dev/null || true
    log "$ruser's remaining processes stopped"
  fi
  exit 0
fi

image=${MCP_EXEC_IMAGE:-$(cat images/python-sandbox/TAG)}
conf=/etc/containers/containers.conf.d/50-mcp-exec.conf
service_log=${MCP_EXEC_PODMAN_LOG:-/var/log/mcp-exec-podman.log}

[ "$(id -u)" = 0 ] || die "run as root (it installs packages, writes /etc/containers and starts the service)"

# --- install ---------------------------------------------------------------------------
need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
if [ "$mode" = rootless ]; then
  command -v newuidmap >/dev/null 2>&1 || need+=(uidmap)
  command -v slirp4netns >/dev/null 2>&1 || need+=(slirp4netns)
fi
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# --- configuration ---------------------------------------------------------------------
# crun refuses hybrid cgroup v1 hosts ("cgroups in hybrid mode not supported"); podman
# prefers crun when both are installed. Probe it once with a throwaway container.
crun_works() {
  command -v crun >/dev/null 2>&1 || return 1
  podman image exists "$image" 2>/dev/null || return 1
  podman --runtime crun run --rm --network none --entrypoint /bin/true "$image" >/dev/null 2>&1
}

write_conf() { # prints "changed" when the file was (re)written
  local runtime=$1 want
  want="# Written by mcp-exec's scripts/podman.sh.
[containers]
# podman raises RLIMIT_NOFILE/NPROC by default; without CAP_SYS_RESOURCE every container
# then fails (\"error setting rlimits for ready process\").
default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]
# /etc/hosts: podman copies the host's /etc/hosts and adds host.containers.internal
# (the host's address) even with network none; start from an empty file instead and
# add no host entry, as Docker does (localhost and the container's name only).
base_hosts_file = \"none\"
host_containers_internal_ip = \"none\""
  if [ -n "$runtime" ]; then
    want+="
[engine]
# runc: crun refuses this host's hybrid cgroup v1 layout, or is not installed.
runtime = \"$runtime\""
  fi
  if [ -f "$conf" ] && [ "$(cat "$conf")" = "$want" ]; then
    return 0
  fi
  mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$want" >"$conf"
  log "wrote $conf"
  echo changed
}

# The ulimits first (nothing runs without them), then the runtime choice.
changed=""
cur_runtime=""
[ -f "$conf" ] && cur_runtime=$(sed -n 's/^runtime = "\(.*\)"$/\1/p' "$conf")
[ -n "$(write_conf "$cur_runtime")" ] && changed=1

# --- image (rootful store) --------------------------------------------------------------
load_image() { # $1: "" for root, or a user name
  local who=$1
  local -a as=()
  [ -n "$who" ] && as=(runuser -u "$who" -- env "XDG_RUNTIME_DIR=$xdg" HOME="$rhome")
  # Present and the same image as Docker's (docker save | podman load keeps the id): done.
  # One Docker has rebuilt since (a changed Dockerfile, scripts/images.sh) is loaded again.
  local want=""
  want=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  if "${as[@]}" podman image exists "$image" 2>/dev/null; then
    local have
    have=$("${as[@]}" podman image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
    if [ -z "$want" ] || [ "sha256:${have#sha256:}" = "$want" ]; then
      return 0
    fi
  fi
  [ -n "$want" ] ||
    die "$image is in neither podman's nor Docker's store: build it with scripts/images.sh first"
  log "loading $image into ${who:-root}'s podman store (docker save | podman load, about a minute)"
  docker save "$image" | "${as[@]}" podman load -q >/dev/null
  # podman load names images loaded from a docker archive localhost/NAME; short-name
  # resolution finds them under NAME too, which is what the launcher asks for.
  "${as[@]}" podman image exists "$image" || die "podman does not find $image after loading it"
}
load_image ""

if command -v crun >/dev/null 2>&1 && [ "$cur_runtime" != "runc" ] && ! crun_works; then
  log "crun cannot run a container here; using runc"
  [ -n "$(write_conf runc)" ] && changed=1
elif ! command -v crun >/dev/null 2>&1 && [ -z "$cur_runtime" ]; then
  # Only runc is installed: say so anyway, so that installing crun later changes nothing.
  [ -n "$(write_conf runc)" ] && changed=1
fi

# --- service ---------------------------------------------------------------------------
sock_answers() { # $1: socket path
  [ -S "$1" ] && timeout 10 docker -H "unix://$1" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# ours_running PIDFILE: prints the pid recorded there if that process is still the
# service this script started (not a reused pid).
ours_running() {
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'podman system service'; then
    echo "$pid"
  fi
}

# service_cwd PID: the working directory of the podman process PID is or started (for
# rootless, PID is runuser's, and podman its child).
service_cwd() {
  local child
  child=$(pgrep -P "$1" -x podman | head -n 1 || true)
  readlink "/proc/${child:-$1}/cwd"
}

# The service runs in the socket's directory: conmon writes an "oom" file into its
# working directory when a container is OOM-killed, which must not land in whatever
# directory this script was started from (such as a checkout).
start_service() { # $1: socket, $2: pid file, $3: log, $4: user ("" for root)
  local sock=$1 pidf=$2 logf=$3 who=$4
  local rundir pid
  rundir=$(dirname "$sock")
  pid=$(ours_running "$pidf")
  if [ -n "$pid" ] && [ -n "$changed" ]; then
    log "configuration changed: restarting the service (pid $pid)"
  elif [ -n "$pid" ] && [ "$(service_cwd "$pid")" != "$rundir" ]; then
    log "the service (pid $pid) runs in $(service_cwd "$pid"): restarting it in $rundir"
  else
    pid=""
  fi
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  if sock_answers "$sock"; then
    log "service answers on $sock"
    return 0
  fi
  if [ -e "$sock" ]; then
    log "removing stale socket $sock"
    rm -f "$sock"
  fi
  mkdir -p "$rundir"
  log "starting podman system service on $sock (log: $logf)"
  if [ -n "$who" ]; then
    chown "$who" "$rundir"
    : >"$logf"; chown "$who" "$logf"
    (cd "$rundir" && exec setsid nohup runuser -u "$who" -- env "XDG_RUNTIME_DIR=$xdg" HOME="$rhome" \
      podman system service --time=0 "unix://$sock") >"$logf" 2>&1 </dev/null &
  else
    (cd "$rundir" && exec setsid nohup podman system service --time=0 "unix://$sock") >"$logf" 2>&1 </dev/null &
  fi
  echo $! >"$pidf"
  for _ in $(seq 1 100); do
    if sock_answers "$sock"; then
      log "service up on $sock"
      return 0
    fi
    sleep 0.2
  done
  log "the service did not answer within 20 s; last lines of $logf:"
  tail -n 20 "$logf" >&2 || true
  exit 1
}

if [ "$mode" = rootful ]; then
  sock=/run/podman/podman.sock
  start_service "$sock" /run/podman/mcp-exec-service.pid "$service_log" ""
  echo "DOCKER_HOST=unix://$sock; export DOCKER_HOST"
  exit 0
fi

# --- rootless --------------------------------------------------------------------------
if ! id -u "$ruser" >/dev/null 2>&1; then
  log "creating user $ruser"
  useradd --create-home --shell /usr/sbin/nologin --user-group "$ruser"
fi
ruid=$(id -u "$ruser")
rhome=$(getent passwd "$ruser" | cut -d: -f6)
xdg=/run/user/$ruid
# Subordinate ids for the user namespace (useradd adds them on Debian when
# /etc/subuid exists; add a range ourselves otherwise).
for f in /etc/subuid /etc/subgid; do
  touch "$f"
  if ! grep -q "^$ruser:" "$f"; then
    start=$(( 200000 + (ruid % 1000) * 65536 ))
    echo "$ruser:$start:65536" >>"$f"
    log "added $ruser:$start:65536 to $f"
    changed=1
  fi
done
mkdir -p "$xdg"; chown "$ruser:" "$xdg"; chmod 700 "$xdg"
as_ruser() { runuser -u "$ruser" -- env "XDG_RUNTIME_DIR=$xdg" HOME="$rhome" "$@"; }
# Storage: without a usable fuse-overlayfs (/dev/fuse is root's here) rootless podman
# falls back to vfs, which copies the whole image per container (12-20 s each). The
# kernel's native overlay works in a user namespace (Linux >= 5.13): ask for it.
sconf=$rhome/.config/containers/storage.conf
if ! grep -qs '^driver = "overlay"' "$sconf"; then
  install -d -o "$ruser" -g "$(id -gn "$ruser")" "$rhome/.config" "$rhome/.config/containers"
  printf '# Written by mcp-exec scripts/podman.sh: native overlay, not vfs.\n[storage]\ndriver = "overlay"\n' >"$sconf"
  chown "$ruser:" "$sconf"
  changed=1
fi
driver=$(as_ruser podman info --format '{{.Store.GraphDriverName}}' 2>/dev/null || true)
if [ "$driver" != overlay ]; then
  log "$ruser's store uses '${driver:-?}': resetting it to use overlay"
  pid=$(ours_running "$xdg/mcp-exec-service.pid")
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; sleep 1; fi
  as_ruser podman system reset -f >/dev/null 2>&1 || true
  changed=1
fi
if [ -n "$changed" ]; then
  as_ruser podman system migrate >/dev/null 2>&1 || true
fi
load_image "$ruser"
rsock=$xdg/podman/podman.sock
start_service "$rsock" "$xdg/mcp-exec-service.pid" "${service_log%.log}-rootless.log" "$ruser"
echo "DOCKER_HOST=unix://$rsock; export DOCKER_HOST"
