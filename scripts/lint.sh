#!/usr/bin/env bash
# Linters (`make lint`; scripts/test.sh runs this before the long suites):
#   - staticcheck on every package, with every build tag the tests use;
#   - govulncheck against the Go vulnerability database;
#   - shellcheck on every shell script of the repository.
# The Go tools are installed from the Go module proxy, at pinned versions, into a
# cache directory outside the clone ($MCP_EXEC_TOOLS, default ~/.cache/mcp-exec/tools),
# once; shellcheck from Debian's packages when missing.
#
# govulncheck needs its database (vuln.go.dev, or a local copy named by
# MCP_EXEC_VULNDB, e.g. file:///srv/vulndb). When neither can be read, the step says in
# capitals that nothing was checked and goes on (without building govulncheck when
# vuln.go.dev does not answer at all); MCP_EXEC_REQUIRE_VULNCHECK=1 makes that a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh
export PATH=$PATH:/usr/local/go/bin

staticcheck_version=v0.8.2  # staticcheck 2026.2.2
govulncheck_version=v1.9.0
tools=${MCP_EXEC_TOOLS:-$HOME/.cache/mcp-exec/tools}

# install NAME PACKAGE VERSION: the tool's binary, built once per version.
install() {
  local dir=$tools/$1-$3
  if [ ! -x "$dir/$1" ]; then
    echo "lint: installing $2@$3 into $dir" >&2
    mkdir -p "$dir"
    GOBIN=$dir go install "$2@$3"
  fi
  echo "$dir/$1"
}

# vulndb_unreachable: true when no database was named and vuln.go.dev does not answer (no
# DNS, no route, a refused connection, 15 s without an answer). govulncheck is then neither
# built nor run: it could check nothing, and building it cold is a minute or more of a fresh
# machine's run.
vulndb_unreachable() {
  [ -z "${MCP_EXEC_VULNDB:-}" ] || return 1
  ! python3 - <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen("https://vuln.go.dev/index/db.json.gz", timeout=15).close()
except Exception as e:
    print(f"lint: vuln.go.dev: {e}", file=sys.stderr)
    sys.exit(1)
PY
}
vulndb_down() {
  echo "lint: GOVULNCHECK DID NOT RUN: its vulnerability database is unreachable from here."
  echo "lint: NOTHING WAS CHECKED for known vulnerabilities. Set MCP_EXEC_VULNDB to a local copy"
  echo "lint: (file:///PATH) or run where vuln.go.dev answers."
  if [ "${MCP_EXEC_REQUIRE_VULNCHECK:-0}" = 1 ]; then exit 1; fi
  exit 0
}

staticcheck=$(install staticcheck honnef.co/go/tools/cmd/staticcheck "$staticcheck_version")
govulncheck=
if ! vulndb_unreachable; then
  govulncheck=$(install govulncheck golang.org/x/vuln/cmd/govulncheck "$govulncheck_version")
fi
if ! command -v shellcheck >/dev/null; then
  apt_get install -y shellcheck >/dev/null 2>&1 || { apt_get update >/dev/null && apt_get install -y shellcheck >/dev/null; }
fi

# The analyses load the packages in the flavour `go test -race` builds, as go vet does
# in scripts/test.sh, so that a cold build cache compiles the dependencies once for the
# three (measured 2026-12-03 on 2 cores, cold: staticcheck 31 s on the cache go vet -race
# left, 207 s without -race; go vet -race then go test -race's compile 361 s, against
# 552 s for go vet then go test -race). No file of the module has a build constraint on
# race (checked here), so the flag changes nothing they see.
echo "lint: no build constraint on race"
if git ls-files -z '*.go' | xargs -0 grep -lE '^//go:build.*\brace\b'; then
  echo "lint: the files above are built differently under -race, which go vet and staticcheck use here: vet them both ways"
  exit 1
fi
race_goflags="$(go env GOFLAGS) -race"

echo "lint: staticcheck"
GOFLAGS=$race_goflags "$staticcheck" ./...
GOFLAGS=$race_goflags "$staticcheck" -tags enginefault,remoteengine ./...

echo "lint: images/server/deps.txt (scripts/server-deps.sh --check)"
bash scripts/server-deps.sh --check

echo "lint: shellcheck"
git ls-files -z '*.sh' .ci/run | xargs -0 shellcheck

echo "lint: govulncheck"
if [ -z "$govulncheck" ]; then vulndb_down; fi
db=()
if [ -n "${MCP_EXEC_VULNDB:-}" ]; then db=(-db "$MCP_EXEC_VULNDB"); fi
set +e
out=$(GOFLAGS=$race_goflags "$govulncheck" "${db[@]}" ./... 2>&1)
rc=$?
set -e
echo "$out"
if [ "$rc" != 0 ] && grep -q 'fetching vulnerabilities' <<<"$out"; then vulndb_down; fi
exit "$rc"
