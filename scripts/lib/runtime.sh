# shellcheck shell=bash disable=SC2154 # runtime: set by the caller
# Sourced by crun.sh and runsc.sh (from the repository's root, with runtime set to
# the script's name): register an OCI runtime with the local dockerd and prove that a
# hardened container runs under it.

daemon_json=${MCP_EXEC_DAEMON_JSON:-/etc/docker/daemon.json}
image=${MCP_EXEC_IMAGE:-$(cat images/python-sandbox/TAG)}

log() { echo "$runtime: $*" >&2; }
die() { log "$*"; exit 1; }

# runtime_preflight WHAT: root, the local dockerd (never a remote one), answering.
runtime_preflight() {
  [ "$(id -u)" = 0 ] || die "run as root (it installs $1 and edits $daemon_json)"
  if [ -n "${DOCKER_HOST:-}" ] && [ "$DOCKER_HOST" != "unix:///var/run/docker.sock" ]; then
    die "DOCKER_HOST=$DOCKER_HOST: this script registers $1 with the local dockerd only"
  fi
  docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "dockerd does not answer: run scripts/engine.sh first"
}

# runtime_known NAME PATH [ARG...]: dockerd lists runtime NAME with that path and
# exactly those runtimeArgs.
runtime_known() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null |
    python3 -c 'import json, sys; r = json.load(sys.stdin).get(sys.argv[1]) or {}; sys.exit(0 if r.get("path") == sys.argv[2] and (r.get("runtimeArgs") or []) == sys.argv[3:] else 1)' "$@"
}

# register_runtime NAME PATH [ARG...] makes daemon.json's runtimes.NAME
# {"path": PATH, "runtimeArgs": [ARG...]} (no runtimeArgs without ARG), keeping every
# other key, and when that changed it, or dockerd does not list the runtime so, sends
# SIGHUP to dockerd to reload it (no restart) and waits until it lists it.
register_runtime() {
  local name=$1 desc=$* changed pid
  desc=${desc#"$name "} # the path and the arguments, for messages
  mkdir -p "$(dirname "$daemon_json")"
  changed=$(python3 - "$daemon_json" "$@" <<'PY'
import json, os, sys
path, name, binary, *args = sys.argv[1:]
try:
    with open(path) as f:
        text = f.read()
    conf = json.loads(text) if text.strip() else {}
except FileNotFoundError:
    conf = {}
want = {"path": binary}
if args:
    want["runtimeArgs"] = args
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
  if [ -n "$changed" ] || ! runtime_known "$@"; then
    [ -n "$changed" ] && log "registered runtime $name ($desc) in $daemon_json"
    pid=$(cat /var/run/docker.pid 2>/dev/null || pgrep -xo dockerd || true)
    [ -n "$pid" ] || die "no dockerd pid found to send SIGHUP to"
    log "reloading dockerd (SIGHUP to pid $pid)"
    kill -HUP "$pid"
    for _ in $(seq 1 50); do
      runtime_known "$@" && break
      sleep 0.2
    done
    runtime_known "$@" || die "dockerd does not list runtime $name ($desc) after SIGHUP; see its log"
  fi
}

# run_hardened NAME CODE prints what the Python CODE prints (and any error) in a
# hardened container of the sandbox image under runtime NAME.
run_hardened() {
  docker run --rm --runtime "$1" --network none --read-only --cap-drop ALL \
    --security-opt no-new-privileges --user 65532:65532 --memory 64m --pids-limit 32 \
    --log-driver none "$image" python3 -c "$2" 2>&1
}
