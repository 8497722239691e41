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
#   - checks that a hardened container runs under it, with gVisor's kernel.
# Then: mcp-exec --runtime runsc (MCP_EXEC_RUNTIME=runsc), or for the tests
# MCP_EXEC_TEST_RUNTIME=runsc.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "runsc: $*" >&2; }
die() { log "$*"; exit 1; }

name=${MCP_EXEC_RUNSC_NAME:-runsc}
daemon_json=${MCP_EXEC_DAEMON_JSON:-/etc/docker/daemon.json}
image=${MCP_EXEC_IMAGE:-$(cat images/python-sandbox/TAG)}

[ "$(id -u)" = 0 ] || die "run as root (it installs runsc and edits $daemon_json)"
if [ -n "${DOCKER_HOST:-}" ] && [ "$DOCKER_HOST" != "unix:///var/run/docker.sock" ]; then
  die "DOCKER_HOST=$DOCKER_HOST: this script registers runsc with the local dockerd only"
fi
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "dockerd does not answer: run scripts/engine.sh first"

path=${MCP_EXEC_RUNSC_PATH:-}
if [ -z "$path" ] && [ "${MCP_EXEC_RUNSC:-build}" != debian ]; then
  # the pinned gVisor version (scripts/gvisor-build.sh), built once into its cache
  path=$(bash scripts/gvisor-build.sh)/runsc
fi
if [ -z "$path" ]; then
  if ! command -v runsc >/dev/null 2>&1; then
    log "installing runsc"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends runsc >/dev/null 2>&1 || {
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends runsc >/dev/null
    }
  fi
  path=$(command -v runsc)
fi
[ -x "$path" ] || die "$path is not an executable"

# daemon.json: add or fix runtimes.<name>, keep everything else.
mkdir -p "$(dirname "$daemon_json")"
changed=$(python3 - "$daemon_json" "$name" "$path" <<'PY'
import json, os, sys
path, name, binary = sys.argv[1:4]
try:
    with open(path) as f:
        text = f.read()
    conf = json.loads(text) if text.strip() else {}
except FileNotFoundError:
    conf = {}
want = {"path": binary, "runtimeArgs": ["--network=none", "--oci-seccomp"]}
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
PY
)

runtime_known() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null |
    python3 -c 'import json, sys; r = json.load(sys.stdin).get(sys.argv[1]) or {}; sys.exit(0 if r.get("path") == sys.argv[2] and (r.get("runtimeArgs") or []) == ["--network=none", "--oci-seccomp"] else 1)' "$name" "$path"
}

if [ -n "$changed" ] || ! runtime_known; then
  [ -n "$changed" ] && log "registered runtime $name ($path --network=none --oci-seccomp) in $daemon_json"
  pid=$(cat /var/run/docker.pid 2>/dev/null || pgrep -xo dockerd || true)
  [ -n "$pid" ] || die "no dockerd pid found to send SIGHUP to"
  log "reloading dockerd (SIGHUP to pid $pid)"
  kill -HUP "$pid"
  for _ in $(seq 1 50); do
    runtime_known && break
    sleep 0.2
  done
  runtime_known || die "dockerd does not list runtime $name ($path --network=none --oci-seccomp) after SIGHUP; see its log"
fi

if ! out=$(docker run --rm --runtime "$name" --network none --read-only --cap-drop ALL \
  --security-opt no-new-privileges --user 65532:65532 --memory 64m --pids-limit 32 \
  --log-driver none "$image" python3 -c 'import platform; print("ok", platform.release())' 2>&1) ||
  [ "${out%% *}" != ok ]; then
  die "a container under runtime $name failed: $out"
fi
log "runtime $name works: guest kernel ${out#ok } ($path)"
