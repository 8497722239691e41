#!/usr/bin/env bash
# Writes images/server/deps.txt: the packages outside this module that the server's own
# packages import (non-test, for the image's CGO_ENABLED=0 linux build), one per line.
# The server image's Dockerfile compiles them, and so all they import, in a layer keyed
# by go.mod, go.sum and that file alone, so that a change to our sources recompiles our
# packages only (the whole compile took 226-401 s on 2 cores, measured; most of it
# client-go and the Kubernetes API types).
# With --check it writes nothing and fails when the file is not current (scripts/lint.sh
# runs it). A stale list costs build time only: the last build compiles what it misses.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
file=images/server/deps.txt
module=$(go list -m)
want=$(
  cat <<'HEAD'
# Written by scripts/server-deps.sh: the packages outside this module that the server
# imports directly. The Dockerfile compiles them in a layer of their own (see there).
HEAD
  CGO_ENABLED=0 GOOS=linux GOFLAGS=-buildvcs=false go list -deps \
    -f '{{if and .Module (eq .Module.Path "'"$module"'")}}{{range .Imports}}{{.}}{{"\n"}}{{end}}{{end}}' ./cmd/mcp-exec \
    | grep -E '^[a-z0-9-]+\.[a-z]' | grep -v "^$module" | sort -u
)
if [ "${1:-}" = --check ]; then
  if [ "$want" != "$(cat "$file" 2>/dev/null)" ]; then
    echo "server-deps: $file is not current; run scripts/server-deps.sh. The difference:" >&2
    diff <(echo "$want") "$file" >&2 || true
    exit 1
  fi
  exit 0
fi
echo "$want" >"$file"
echo "server-deps: wrote $file ($(grep -vc '^#' "$file") packages)" >&2
