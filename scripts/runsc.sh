#!/usr/bin/env bash
# Registers gVisor's runsc with the local Docker engine as the OCI runtime "runsc",
# idempotently (as root):
#   - builds runsc from gVisor's Go module at a pinned version (scripts/gvisor-build.sh) into a cache
#     directory, once (about 9 minutes on 2 cores with a cold Go build cache, 70 s
#     with a warm one; then nothing). Why not Debian's package (bookworm: 0.0~20221219):
#     it is four years old for a security boundary, has only the slow ptrace platform,
#     dies as a whole when a fork bomb reaches the host's pids limit (exit 2, no result)
#     and cannot OOM-kill one process of the program (the whole sandbox goes).
#     MCP_EXEC_RUNSC=debian uses the package instead; MCP_EXEC_RUNSC_PATH names any
#     other runsc binary;
#   - adds "runtimes": {"runsc": {"path": ..., "runtimeArgs": ["--network=none",
#     "--oci-seccomp"]}} to /etc/docker/daemon.json, keeping every other key, and sends
#     SIGHUP to dockerd to reload it (no restart). --network=none: the sandbox's only
#     network is gVisor's own loopback (without it runsc refuses every NetworkMode-none
#     container: "cannot run with network enabled in root network namespace");
#     --oci-seccomp: gVisor applies the container's seccomp profile to the program's
#     system calls too (without it the profile binds only the host side);
#   - registers the same binary a second time as "runsc-egress" (NAME-egress), with
#     --host-uds=open added: the runtime for egress profiles (docs/egress.md).
#     gVisor refuses a sandbox's connect() to a host Unix socket mounted
#     into it unless runsc runs with it, and mcp-exec checks at start-up that its
#     runtime lets the channel through. It stays a second name so that "runsc" stays
#     strict for every other container on this engine: with the flag, any container
#     of that runtime may connect to whatever host socket is mounted into it (open
#     only: it cannot create one), which mcp-exec's sandboxes never have but others
#     may (a docker.sock someone mounted);
#   - checks that a hardened container runs under each, with gVisor's kernel.
# Then: mcp-exec --runtime runsc (MCP_EXEC_RUNTIME=runsc), or for the tests
# MCP_EXEC_TEST_RUNTIME=runsc; with egress profiles --runtime runsc-egress.
set -euo pipefail
cd "$(dirname "$0")/.."

runtime=runsc
# shellcheck source=scripts/lib/runtime.sh
. scripts/lib/runtime.sh
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh

name=${MCP_EXEC_RUNSC_NAME:-runsc}

runtime_preflight runsc

path=${MCP_EXEC_RUNSC_PATH:-}
if [ -z "$path" ] && [ "${MCP_EXEC_RUNSC:-build}" != debian ]; then
  # the pinned gVisor version (scripts/gvisor-build.sh), built once into its cache
  path=$(bash scripts/gvisor-build.sh)/runsc
fi
if [ -z "$path" ]; then
  if ! command -v runsc >/dev/null 2>&1; then
    log "installing runsc"
    apt_get install -y -qq --no-install-recommends runsc >/dev/null 2>&1 || {
      apt_get update -qq
      apt_get install -y -qq --no-install-recommends runsc >/dev/null
    }
  fi
  path=$(command -v runsc)
fi
[ -x "$path" ] || die "$path is not an executable"

register_runtime "$name" "$path" --network=none --oci-seccomp
register_runtime "$name-egress" "$path" --network=none --oci-seccomp --host-uds=open

for n in "$name" "$name-egress"; do
  if ! out=$(run_hardened "$n" 'import platform; print("ok", platform.release())') || [ "${out%% *}" != ok ]; then
    die "a container under runtime $n failed: $out"
  fi
  log "runtime $n works: guest kernel ${out#ok } ($path)"
done
