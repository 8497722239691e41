#!/usr/bin/env bash
# Registers crun with the local Docker engine as the OCI runtime "crun", idempotently
# (as root):
#   - installs crun from Debian's packages when missing;
#   - on a hybrid cgroup v1 host (a cgroup2 hierarchy at /sys/fs/cgroup/unified that
#     holds controllers), where crun refuses to run ("cgroups in hybrid mode not
#     supported, drop all controllers from cgroupv2"), installs a wrapper that runs each
#     crun invocation in a private mount namespace without that hierarchy, so that crun
#     sees a pure cgroup v1 host (see docs/engines.md for why this is sound);
#   - adds "runtimes": {"crun": {"path": ...}} to /etc/docker/daemon.json, keeping every
#     other key, and sends SIGHUP to dockerd to reload it (no restart);
#   - checks that a hardened container runs under it.
# Then: mcp-exec --runtime crun (MCP_EXEC_RUNTIME=crun), or for the tests
# MCP_EXEC_TEST_RUNTIME=crun.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "crun: $*" >&2; }
die() { log "$*"; exit 1; }

name=${MCP_EXEC_CRUN_NAME:-crun}
daemon_json=${MCP_EXEC_DAEMON_JSON:-/etc/docker/daemon.json}
wrapper=/usr/local/libexec/mcp-exec/crun-hybrid
image=${MCP_EXEC_IMAGE:-$(cat images/python-sandbox/TAG)}

[ "$(id -u)" = 0 ] || die "run as root (it installs crun and edits $daemon_json)"
if [ -n "${DOCKER_HOST:-}" ] && [ "$DOCKER_HOST" != "unix:///var/run/docker.sock" ]; then
  die "DOCKER_HOST=$DOCKER_HOST: this script registers crun with the local dockerd only"
fi
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "dockerd does not answer: run scripts/engine.sh first"

if ! command -v crun >/dev/null 2>&1; then
  log "installing crun"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends crun >/dev/null
fi
crun_bin=$(command -v crun)

# Hybrid: /sys/fs/cgroup is the v1 tmpfs, and the v2 hierarchy mounted at unified
# holds controllers (crun accepts hybrid hosts only when it holds none).
hybrid=0
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] &&
  [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ] &&
  [ -n "$(tr -d ' \n' </sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
  hybrid=1
fi

path=$crun_bin
if [ "$hybrid" = 1 ]; then
  want="#!/bin/sh
# Written by mcp-exec scripts/crun.sh. crun refuses hybrid cgroup v1 hosts; run it in a
# private mount namespace where the cgroup2 hierarchy at /sys/fs/cgroup/unified is
# unmounted, so that it sees (and uses) the v1 controllers only, like runc does.
# Nothing changes outside that namespace (propagation is private).
exec /usr/bin/unshare --mount --propagation private /bin/sh -c '
  umount /sys/fs/cgroup/unified 2>/dev/null || umount -l /sys/fs/cgroup/unified || exit 125
  exec $crun_bin \"\$@\"' crun \"\$@\""
  if [ "$(cat "$wrapper" 2>/dev/null)" != "$want" ]; then
    install -d -m 0755 "$(dirname "$wrapper")"
    printf '%s\n' "$want" >"$wrapper.tmp"
    chmod 0755 "$wrapper.tmp"
    mv -f "$wrapper.tmp" "$wrapper"
    log "wrote $wrapper (hybrid cgroup host)"
  fi
  path=$wrapper
fi

# daemon.json: add or fix runtimes.<name>, keep everything else.
mkdir -p "$(dirname "$daemon_json")"
changed=$(python3 - "$daemon_json" "$name" "$path" <<'EOF'
import json, os, sys
path, name, binary = sys.argv[1:4]
try:
    with open(path) as f:
        text = f.read()
    conf = json.loads(text) if text.strip() else {}
except FileNotFoundError:
    conf = {}
want = {"path": binary}
if conf.get("runtimes", {}).get(name) == want:
    print("")
    sys.exit(0)
conf.setdefault("runtimes", {})[name] = want
tmp = path + ".mcp-exec.tmp"
with open(tmp, "w") as f:
    json.dump(conf, f, indent=2)
    f.write("\n")
os.chmod(tmp, 0o644)
os.replace(tmp, path)
print("changed")
EOF
)

runtime_known() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q "\"$name\""; }

if [ -n "$changed" ] || ! runtime_known; then
  [ -n "$changed" ] && log "registered runtime $name ($path) in $daemon_json"
  pid=$(cat /var/run/docker.pid 2>/dev/null || pgrep -xo dockerd || true)
  [ -n "$pid" ] || die "no dockerd pid found to send SIGHUP to"
  log "reloading dockerd (SIGHUP to pid $pid)"
  kill -HUP "$pid"
  for _ in $(seq 1 50); do
    runtime_known && break
    sleep 0.2
  done
  runtime_known || die "dockerd does not list runtime $name after SIGHUP; see its log"
fi

if ! out=$(docker run --rm --runtime "$name" --network none --read-only --cap-drop ALL \
  --security-opt no-new-privileges --user 65532:65532 --memory 64m --pids-limit 32 \
  --log-driver none "$image" python3 -c 'print("ok")' 2>&1) || [ "$out" != ok ]; then
  die "a container under runtime $name failed: $out"
fi
log "runtime $name works ($("$crun_bin" --version | head -n 1))"
