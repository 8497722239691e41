#!/usr/bin/env bash
# gvisor-build.sh [--shim] [--shim-nooomadj] [--node-shim]
# gvisor-build.sh --which-node-shim   prints the shim a node of this host needs (shim or shim-nooomadj)
# Builds gVisor's runsc (and, when asked, its containerd shim) from gVisor's Go module at one
# pinned version into a cache directory outside the clone, keyed by version, once each, and
# prints that directory:
#   $MCP_EXEC_RUNSC_CACHE/<version>/runsc          the OCI runtime (scripts/runsc.sh registers
#                                                  it with dockerd)
#   $MCP_EXEC_RUNSC_CACHE/<version>/shim           --shim: gvisor.dev/gvisor/shim as released,
#                                                  installed as containerd-shim-runsc-v1 on
#                                                  containerd's PATH on a node
#   $MCP_EXEC_RUNSC_CACHE/<version>/shim-nooomadj  --shim-nooomadj: the same shim with one
#                                                  change, for hosts without CAP_SYS_RESOURCE
#                                                  (the test cluster, scripts/k8s/up.sh; below)
# runsc: about 9 minutes on 2 cores with a cold Go build cache, 70 s with a warm one; the shim
# about 15 s warm, the patched one about 45 s. Then nothing. All from the same module version,
# so a shim drives the runsc it was built with.
#
# Why the patch: the shim's `start` sets the oom_score_adj of the shim daemon it starts to -999
# (so that the OOM killer spares it) and fails when it cannot; lowering an oom_score_adj needs
# CAP_SYS_RESOURCE, which no process on our VMs holds (the bounding set lacks it; the same reason
# the test cluster's containerd runs with restrict_oom_score_adj, docs/kubernetes.md). The patch
# sets 0 instead (containerd's own score here), which needs no capability; nothing else changes.
set -euo pipefail
# The gVisor module version built by default: the newest the Go module proxy serves
# (go list -m gvisor.dev/gvisor@latest, 2026-11-30).
version=${MCP_EXEC_RUNSC_VERSION:-v0.0.0-20260905035102-160fafc42237}
cache=${MCP_EXEC_RUNSC_CACHE:-/var/cache/mcp-exec/runsc}
dir=$cache/$version
export PATH=$PATH:/usr/local/go/bin
log() { echo "gvisor-build: $*" >&2; }
# build PACKAGE BINARY NAME: go install PACKAGE@version, its binary BINARY kept as dir/NAME.
build() {
  [ -x "$dir/$3" ] && return 0
  log "building $1 $version (once)"
  mkdir -p "$dir"
  rm -rf "$dir.tmp"
  GOBIN=$dir.tmp CGO_ENABLED=0 go install "$1@$version" >&2
  mv -f "$dir.tmp/$2" "$dir/$3"
  rmdir "$dir.tmp"
}
# shim_nooomadj: the shim from a copy of the module with oomScoreMax (-999) set to 0, built in a
# wrapper module that replaces gvisor.dev/gvisor with the copy.
shim_nooomadj() {
  [ -x "$dir/shim-nooomadj" ] && return 0
  log "building gvisor.dev/gvisor/shim $version without the oom_score_adj -999 (once)"
  local src w
  src=$(go mod download -json "gvisor.dev/gvisor@$version" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  w=$(mktemp -d)
  trap 'rm -rf "$w"' RETURN
  cp -r "$src" "$w/gvisor"
  chmod -R u+w "$w/gvisor"
  grep -q 'oomScoreMax = -999$' "$w/gvisor/pkg/shim/v1/manager.go" || { log "pkg/shim/v1/manager.go has no 'oomScoreMax = -999': look at the patch again"; return 1; }
  sed -i 's/oomScoreMax = -999$/oomScoreMax = 0 \/\/ mcp-exec: no CAP_SYS_RESOURCE to lower it/' "$w/gvisor/pkg/shim/v1/manager.go"
  printf 'module mcp-exec.local/gvisor-shim\n\ngo %s\n\nrequire gvisor.dev/gvisor %s\n\nreplace gvisor.dev/gvisor => ./gvisor\n' \
    "$(sed -n 's/^go //p' "$w/gvisor/go.mod")" "$version" > "$w/go.mod"
  cp "$w/gvisor/go.sum" "$w/go.sum"
  mkdir -p "$dir"
  (cd "$w" && CGO_ENABLED=0 go build -o "$dir/shim-nooomadj.tmp" gvisor.dev/gvisor/shim >&2)
  mv -f "$dir/shim-nooomadj.tmp" "$dir/shim-nooomadj"
}
# node_shim: the shim a node of this host needs (scripts/k8s/up.sh): the released one where
# processes may lower an oom_score_adj (CAP_SYS_RESOURCE in the bounding set), else the patched one.
node_shim() {
  if (( (0x$(awk '/^CapBnd/ {print $2}' /proc/self/status) >> 24) & 1 )); then echo shim; else echo shim-nooomadj; fi
}
if [ "${1:-}" = --which-node-shim ]; then node_shim; exit 0; fi
# One build at a time per cache: scripts/test.sh starts this in the background early (its
# prefetch), and the step that needs runsc calls it again; the second waits for the first and
# then finds everything built.
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
build gvisor.dev/gvisor/runsc runsc runsc
for a in "$@"; do
  case $a in
  --shim) build gvisor.dev/gvisor/shim shim shim ;;
  --shim-nooomadj) shim_nooomadj ;;
  --node-shim) if [ "$(node_shim)" = shim ]; then build gvisor.dev/gvisor/shim shim shim; else shim_nooomadj; fi ;;
  *) log "unknown argument $a; usage: $0 [--shim] [--shim-nooomadj] [--node-shim]"; exit 2 ;;
  esac
done
echo "$dir"
