#!/usr/bin/env bash
# Builds the sandbox image if it is missing (or always, with --force).
# When debian:trixie-slim cannot be found locally it is first built with mmdebstrap
# (installed from Debian's packages when absent), since no registry may be reachable.
set -euo pipefail

cd "$(dirname "$0")/.."
image=${MCP_EXEC_IMAGE:-$(cat images/python-sandbox/TAG)}
base=debian:trixie-slim
force=0
[ "${1:-}" = "--force" ] && force=1

log() { echo "images: $*" >&2; }

if [ "$force" = 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
  log "$image present"
  exit 0
fi

if ! docker image inspect "$base" >/dev/null 2>&1; then
  if docker pull "$base" >/dev/null 2>&1; then
    log "pulled $base"
  else
    if ! command -v mmdebstrap >/dev/null 2>&1; then
      log "installing mmdebstrap"
      DEBIAN_FRONTEND=noninteractive apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
    fi
    log "building $base with mmdebstrap (about a minute)"
    mmdebstrap --quiet --variant=minbase trixie - | docker import - "$base" >/dev/null
  fi
fi

log "building $image"
docker build --quiet -t "$image" images/python-sandbox >/dev/null
log "$image built"
