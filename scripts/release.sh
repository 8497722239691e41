#!/usr/bin/env bash
# `make release`: static mcp-exec binaries of the commit HEAD for linux/amd64 and
# linux/arm64 in dist/, with SBOMs and SHA256SUMS, checked reproducible.
#
# What is built is the commit, not the working tree: the sources come from `git archive
# HEAD`, so untracked files cannot enter, and a tree with uncommitted changes to tracked
# files is refused (its version would say -dirty of bytes nobody can rebuild). The
# version is scripts/version.sh's, the one `mcp-exec version`, the handshake's serverInfo
# and the images' label report; a tag vX.Y.Z needs a "## [X.Y.Z]" entry in CHANGELOG.md.
#
# dist/ then holds, per architecture:
#   mcp-exec-VERSION-linux-ARCH            CGO_ENABLED=0, -trimpath, -buildvcs=false,
#                                          -ldflags "-s -w -buildid= -X main.version=VERSION"
#   mcp-exec-VERSION-linux-ARCH.modules.txt  `go version -m`: the Go toolchain, the build
#                                          settings, and every module with version and sum
#   mcp-exec-VERSION-linux-ARCH.cdx.json   the same modules as a CycloneDX SBOM, from
#                                          cyclonedx-gomod (pinned below, fetched through the
#                                          Go module proxy; --no-cyclonedx skips it offline)
# and SHA256SUMS over all of them (`cd dist && sha256sum -c SHA256SUMS`).
#
# Reproducibility: every binary is built a second time from a second `git archive` at
# another path (of another length) into another directory, and the release fails unless
# the bytes are equal. With the shared build cache, that proves the link and the embedded
# paths and build ids depend on neither the checkout's location nor the output's (the
# compiled packages are reused from the cache). --cold builds the second copy with an
# empty GOCACHE, so every package is compiled again too (several minutes on 2 cores).
set -euo pipefail

cd "$(dirname "$0")/.."
cyclonedx=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
arches=(amd64 arm64)
cdx=1
cold=0
for arg in "$@"; do
  case "$arg" in
    --no-cyclonedx) cdx=0 ;;
    --cold) cold=1 ;;
    *) echo "usage: scripts/release.sh [--no-cyclonedx] [--cold]" >&2; exit 2 ;;
  esac
done

log() { echo "release: $*" >&2; }
die() { log "$*"; exit 1; }

if ! git diff --quiet HEAD --; then
  die "the working tree has uncommitted changes to tracked files; a release is built from a commit: commit or stash them"
fi
version=$(bash scripts/version.sh)
commit=$(git rev-parse HEAD)
if [[ "$version" =~ ^v([0-9]+\.[0-9]+\.[0-9]+.*)$ ]] && git describe --tags --exact-match HEAD >/dev/null 2>&1; then
  grep -q "^## \[${BASH_REMATCH[1]}\]" CHANGELOG.md \
    || die "HEAD is tagged $version but CHANGELOG.md has no '## [${BASH_REMATCH[1]}]' entry"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcp-exec-release.XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
# Two copies of the commit at paths of different lengths: -trimpath must make the
# location irrelevant.
src_a=$tmp/a
src_b=$tmp/second/checkout/of/the/same/commit
mkdir -p "$src_a" "$src_b" "$tmp/check"
git archive "$commit" | tar -x -C "$src_a"
git archive "$commit" | tar -x -C "$src_b"

# build SRC ARCH OUT [ENV...]: one static binary. Everything that changes the bytes is
# fixed here rather than taken from the caller's environment (GOFLAGS, GOAMD64, ...);
# the Go toolchain is the one on PATH, named in the SBOMs.
build() {
  local src=$1 arch=$2 out=$3
  shift 3
  (cd "$src" && env CGO_ENABLED=0 GOOS=linux GOARCH="$arch" GOAMD64=v1 GOARM64=v8.0 \
    GOFLAGS=-mod=readonly GOEXPERIMENT= GOTOOLCHAIN=local "$@" \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -buildid= -X main.version=$version" -o "$out" ./cmd/mcp-exec)
}

# Built into $tmp/dist and moved to dist/ only when every check passed, so a failed
# release leaves no binary to ship by mistake.
out=$tmp/dist
mkdir -p "$out"
log "version $version (commit ${commit:0:12}), $(go env GOVERSION)"
for arch in "${arches[@]}"; do
  name=mcp-exec-$version-linux-$arch
  t0=$SECONDS
  build "$src_a" "$arch" "$out/$name"
  log "$name built in $((SECONDS - t0)) s"
  t0=$SECONDS
  if [ "$cold" = 1 ]; then
    mkdir -p "$tmp/gocache"
    build "$src_b" "$arch" "$tmp/check/$name" GOCACHE="$tmp/gocache"
  else
    build "$src_b" "$arch" "$tmp/check/$name"
  fi
  if ! cmp -s "$out/$name" "$tmp/check/$name"; then
    die "$name is not reproducible: a second build from $src_b differs ($(sha256sum <"$out/$name" | cut -c1-16) vs $(sha256sum <"$tmp/check/$name" | cut -c1-16))"
  fi
  log "$name rebuilt elsewhere$([ "$cold" = 1 ] && echo ' with an empty build cache') in $((SECONDS - t0)) s: identical"
  (cd "$out" && go version -m "$name" >"$name.modules.txt")
  if [ "$cdx" = 1 ]; then
    GOFLAGS='' go run "$cyclonedx" bin -json -noserial -notimestamp \
      -version "$version" -output "$out/$name.cdx.json" "$out/$name" \
      || die "cyclonedx-gomod failed (no module proxy? --no-cyclonedx skips the CycloneDX SBOM)"
  fi
done
(cd "$out" && sha256sum -- * >SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
rm -rf dist
mv "$out" dist
log "dist/:"
ls -l dist >&2
