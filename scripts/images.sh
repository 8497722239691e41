#!/usr/bin/env bash
# Builds the sandbox image if it is missing or was built from another Dockerfile (or
# always, with --force).
# When debian:trixie-slim cannot be found locally it is first built with mmdebstrap
# (installed from Debian's packages when absent), since no registry may be reachable.
#
# With --server it also builds the server image (images/server/Dockerfile, tag
# $MCP_EXEC_SERVER_IMAGE, default mcp-exec/server:latest), always, since its sources
# change. Its build stage needs a Go toolchain image: $MCP_EXEC_GO_IMAGE if set, else
# golang:1.26-trixie when present or pullable, else mcp-exec/go-toolchain:1.26, which
# this script seeds from the host's Go (/usr/local/go, or `go env GOROOT`) on top of
# debian:trixie-slim. Modules are downloaded inside the build through the Go module
# proxy (GOPROXY and GOSUMDB are passed on when set).
# `scripts/images.sh --go-image` seeds the toolchain image if needed and prints the
# reference to use as GO_IMAGE (scripts/compose-test.sh uses it).
# With --standalone it also builds the server image, as --server does, and then the
# standalone image (images/standalone/Dockerfile, tag $MCP_EXEC_STANDALONE_IMAGE,
# default mcp-exec/standalone:latest): the server image's binary added to the sandbox
# image, for --backend process (docs/standalone.md). Always rebuilt.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh
image=${MCP_EXEC_IMAGE:-$(cat images/python-sandbox/TAG)}
base=debian:trixie-slim
server_image=${MCP_EXEC_SERVER_IMAGE:-mcp-exec/server:latest}
official_go=golang:1.26-trixie
seeded_go=mcp-exec/go-toolchain:1.26
force=0
server=0
standalone=0
standalone_image=${MCP_EXEC_STANDALONE_IMAGE:-mcp-exec/standalone:latest}
# The server's version (`mcp-exec version`, serverInfo) and both images' version label.
version=$(bash scripts/version.sh)
print_go=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --server) server=1 ;;
    --standalone) standalone=1 ;;
    --go-image) print_go=1 ;;
    *) echo "usage: scripts/images.sh [--force] [--server] [--standalone] [--go-image]" >&2; exit 2 ;;
  esac
done

log() { echo "images: $*" >&2; }

ensure_base() {
  if docker image inspect "$base" >/dev/null 2>&1; then
    return
  fi
  if docker pull "$base" >/dev/null 2>&1; then
    log "pulled $base"
    return
  fi
  if ! command -v mmdebstrap >/dev/null 2>&1; then
    log "installing mmdebstrap"
    apt_get update -qq
    apt_get install -y -qq mmdebstrap >/dev/null
  fi
  log "building $base with mmdebstrap (about a minute)"
  mmdebstrap --quiet --variant=minbase trixie - | docker import - "$base" >/dev/null
}

# The sandbox image carries the SHA-256 of its Dockerfile (and of the file it copies) as
# a label, so an image built from an older Dockerfile (one without ca-certificates, say)
# is rebuilt, not reused.
sandbox_sum=$(cat images/python-sandbox/Dockerfile images/python-sandbox/node-main.js | sha256sum | cut -d' ' -f1)

ensure_sandbox() {
  if [ "$force" = 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
    have=$(docker image inspect -f '{{ index .Config.Labels "dev.mcp-exec.dockerfile-sha256" }}' "$image" 2>/dev/null || true)
    if [ "$have" = "$sandbox_sum" ]; then
      log "$image present"
      return
    fi
    log "$image was built from another Dockerfile: rebuilding"
  fi
  ensure_base
  log "building $image"
  docker build --quiet --label "dev.mcp-exec.dockerfile-sha256=$sandbox_sum" -t "$image" images/python-sandbox >/dev/null
  log "$image built"
}

# go_image prints the Go toolchain image for the server's build stage, seeding
# $seeded_go from the host's Go when neither $MCP_EXEC_GO_IMAGE nor the official
# image can be had. The seeded image is rebuilt when the host's Go version changes.
go_image() {
  if [ -n "${MCP_EXEC_GO_IMAGE:-}" ]; then
    echo "$MCP_EXEC_GO_IMAGE"
    return
  fi
  if docker image inspect "$official_go" >/dev/null 2>&1 || docker pull "$official_go" >/dev/null 2>&1; then
    echo "$official_go"
    return
  fi
  local gobin goroot gover
  gobin=$(command -v go || echo /usr/local/go/bin/go)
  if [ ! -x "$gobin" ]; then
    log "cannot pull $official_go and no Go toolchain on this host to seed $seeded_go from; install Go or set MCP_EXEC_GO_IMAGE"
    return 1
  fi
  goroot=$("$gobin" env GOROOT)
  gover=$("$gobin" env GOVERSION)
  if [ "$(docker image inspect -f '{{index .Config.Labels "dev.mcp-exec.go-version"}}' "$seeded_go" 2>/dev/null)" = "$gover" ]; then
    echo "$seeded_go"
    return
  fi
  ensure_base
  log "cannot pull $official_go: seeding $seeded_go from $goroot ($gover)"
  local ctx
  ctx=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$ctx'" RETURN
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
COPY go /usr/local/go
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local
LABEL dev.mcp-exec.go-version=$gover
DOCKERFILE
  # The context is streamed as a tar: the Dockerfile and CA bundle from the temporary
  # directory and the toolchain straight from GOROOT, without copying it on disk.
  tar -C "$ctx" -cf - Dockerfile ca-certificates.crt \
      -C "$(dirname "$goroot")" --anchored --exclude="$(basename "$goroot")/test" \
      --transform "s,^$(basename "$goroot"),go," "$(basename "$goroot")" \
    | docker build --quiet -t "$seeded_go" - >/dev/null
  log "$seeded_go built"
  echo "$seeded_go"
}

build_server() {
  local goimg
  goimg=$(go_image)
  log "building $server_image (GO_IMAGE=$goimg, version $version)"
  local t0=$SECONDS
  # Only the directories the build copies go into the context (the legacy builder
  # would send the whole repository: it ignores images/server/Dockerfile.dockerignore).
  # They go whole, tests included, so that a later docker-compose 1.x build of the
  # same sources finds every layer in the cache.
  tar -cf - go.mod go.sum images/server/deps.txt cmd launcher mcpserver images/server/Dockerfile \
    | docker build --quiet -f images/server/Dockerfile -t "$server_image" \
        --build-arg GO_IMAGE="$goimg" --build-arg VERSION="$version" \
        ${GOPROXY:+--build-arg GOPROXY="$GOPROXY"} ${GOSUMDB:+--build-arg GOSUMDB="$GOSUMDB"} \
        - >/dev/null
  log "$server_image built in $((SECONDS - t0)) s"
}

# build_standalone builds the standalone image (images/standalone/Dockerfile): the
# binary of the server image that build_server built, added to the sandbox image. It
# compiles nothing, so it takes a few seconds; always rebuilt, like the server image.
build_standalone() {
  log "building $standalone_image (the server of $server_image in $image, version $version)"
  docker build --quiet -t "$standalone_image" \
    --build-arg SERVER_IMAGE="$server_image" --build-arg SANDBOX_IMAGE="$image" \
    --build-arg VERSION="$version" \
    - <images/standalone/Dockerfile >/dev/null
  log "$standalone_image built"
}

if [ "$print_go" = 1 ]; then
  go_image
  exit 0
fi
ensure_sandbox
if [ "$server" = 1 ] || [ "$standalone" = 1 ]; then
  build_server
fi
if [ "$standalone" = 1 ]; then
  build_standalone
fi
