#!/usr/bin/env bash
# Writes images/server/deps.txt: the packages outside this module that the server's own
# packages import (the binary ./cmd/mcp-exec and what it is built from). The server
# image's Dockerfile compiles them in a layer of their own, after `go mod download` and
# before the sources are copied, so that a change to the sources recompiles only the
# module's packages (the layer is cached until go.mod, go.sum or this list change).
# Building these compiles everything they import too, so the direct imports are enough.
#
#   scripts/server-deps.sh           rewrite the list
#   scripts/server-deps.sh --check   fail if the list is not what it would write
#                                    (scripts/lint.sh runs this)
#
# A stale list is not wrong, only slower: the final `go build` compiles what the layer
# did not. The check keeps it from going stale quietly.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
out=images/server/deps.txt

mod=$(go list -m)
# The module's packages in the binary's dependency graph (tests excluded).
mine=$(go list -deps -f '{{if and (not .Standard) .Module}}{{if eq .Module.Path "'"$mod"'"}}{{.ImportPath}}{{end}}{{end}}' ./cmd/mcp-exec)
# Their imports outside the module and outside the standard library.
# shellcheck disable=SC2086 # $mine is a list of import paths
want=$( {
  echo "# The packages outside the module that the server's packages import, compiled in"
  echo "# a layer of their own by images/server/Dockerfile. Written by scripts/server-deps.sh;"
  echo "# checked by scripts/lint.sh."
  go list -f '{{range .Imports}}{{.}}{{"\n"}}{{end}}' $mine | sort -u | grep -v "^$mod\(/\|$\)" \
    | xargs go list -f '{{if not .Standard}}{{.ImportPath}}{{end}}' | sort -u
} )

if [ "${1:-}" = --check ]; then
  if [ "$want" != "$(cat "$out" 2>/dev/null)" ]; then
    echo "server-deps: $out is stale; run scripts/server-deps.sh and commit it" >&2
    diff <(cat "$out" 2>/dev/null) <(echo "$want") >&2 || true
    exit 1
  fi
  exit 0
fi
echo "$want" >"$out"
echo "server-deps: wrote $out ($(grep -vc '^#' "$out") packages)" >&2
