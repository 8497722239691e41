#!/bin/bash
# Builds the test cluster's binaries once into $KCACHE (outside the clone, keyed by version) and
# reuses them when present: etcd, kube-apiserver, kube-scheduler, kubelet, kubectl, and a pause
# image (a tiny Go binary in an OCI layout tarball; no image can be pulled here).
#
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces every staging module with a
# path), so a wrapper module requires it and replaces each staging module with its published
# v0.X.Y. etcd is built from go.etcd.io/etcd/server/v3 at the version kubernetes requires.
# Cold: ~20 min on 2 cores (etcd and kubelet dominate); with a warm Go build cache well under a
# minute; with the binaries present: nothing to do.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$here/env.sh"
BINS="etcd kube-apiserver kube-scheduler kubelet kubectl"
have_all() {
  for b in $BINS; do [ -x "$KCACHE/bin/$b" ] || return 1; done
  [ -f "$KCACHE/images/pause.oci.tar" ]
}
have_all && { kts "binaries present in $KCACHE"; exit 0; }

mkdir -p "$KCACHE"
exec 9>"$KCACHE/.lock"
flock 9   # a second build waits for the first and then finds everything built
have_all && { kts "binaries present in $KCACHE"; exit 0; }

mkdir -p "$KCACHE/bin" "$KCACHE/images" "$KCACHE/build/etcd"
cd "$KCACHE/build"
GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$KV" >/dev/null
kmod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$KV.mod
{
  printf 'module mcp-exec-k8s-build\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$KV"
  sed -n '/^replace (/,/^)/p' "$kmod" | grep '=>' | awk -v v="v0.${KV#1.}" '{print "\t"$1" => "$1" "v}'
  printf ')\n'
} > go.mod
cat > etcd/main.go <<'EOG'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOG
cat > tools.go <<'EOG'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOG
go mod tidy
minor=$(echo "$KV" | cut -d. -f2)
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=v$KV -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
for p in ./etcd k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kube-apiserver \
         k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet; do
  b=$(basename "$p")
  [ -x "$KCACHE/bin/$b" ] && continue
  s=$(date +%s)
  # built to a temporary name and renamed: an interrupted build leaves no half binary
  CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$ld" -o "$KCACHE/bin/.$b.tmp" "$p"
  mv "$KCACHE/bin/.$b.tmp" "$KCACHE/bin/$b"
  kts "built $b in $(( $(date +%s) - s ))s"
done

if [ ! -f "$KCACHE/images/pause.oci.tar" ]; then
  (cd "$here/pause" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$KCACHE/build/pause" .)
  python3 "$here/mkimage.py" "$KCACHE/build/pause" localhost/mcp-exec-k8s/pause:1 "$KCACHE/images/.pause.tmp"
  mv "$KCACHE/images/.pause.tmp" "$KCACHE/images/pause.oci.tar"
fi
kts "binaries ready in $KCACHE"
