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

runtime=crun
# shellcheck source=scripts/lib/runtime.sh
. scripts/lib/runtime.sh
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh

name=${MCP_EXEC_CRUN_NAME:-crun}
wrapper=/usr/local/libexec/mcp-exec/crun-hybrid

runtime_preflight crun

if ! command -v crun >/dev/null 2>&1; then
  log "installing crun"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends crun >/dev/null
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

register_runtime "$name" "$path"

if ! out=$(run_hardened "$name" 'print("ok")') || [ "$out" != ok ]; then
  die "a container under runtime $name failed: $out"
fi
log "runtime $name works ($("$crun_bin" --version | head -n 1))"
