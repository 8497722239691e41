#!/usr/bin/env bash
# The client-side benchmark (`make bench-client`): builds bin/mcp-exec, installs the
# TypeScript SDK of scripts/e2e when it is missing (npm ci), and runs
# scripts/e2e/bench.mjs against the binary over stdio: warm, pandas (preload) and cold
# calls interleaved with their baselines (host python3 -c, docker run --rm -i with the
# seed's flags), hello world in JavaScript and bash, warm and cold (against a host
# node -e and Python's own call), bursts of 10 calls, throughput against a python3 -I -c pass container
# churn. Markdown on stdout, progress on stderr. Arguments go to bench.mjs (e.g.
# --quick, --rounds 50, --sections latency); it needs node 20, a Docker engine, the
# sandbox image, the docker CLI and, for the pandas baseline, pandas in the host
# python (Debian: apt-get install python3-pandas).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/go/bin
go build -o bin/mcp-exec ./cmd/mcp-exec # no -trimpath: shares the build cache with go test
if [ ! -d scripts/e2e/node_modules/@modelcontextprotocol/sdk ]; then
  (cd scripts/e2e && npm ci --no-audit --no-fund >&2)
fi
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain -- launcher mcpserver cmd scripts/e2e/bench.mjs 2>/dev/null | wc -l)
echo "Source: commit $rev$([ "$dirty" -gt 0 ] && echo " with $dirty uncommitted file(s)"); $(nproc) CPUs; load average at start $(cut -d' ' -f1-3 /proc/loadavg)."
echo
exec node scripts/e2e/bench.mjs --cmd "$PWD/bin/mcp-exec" "$@"
