#!/usr/bin/env bash
# The benchmark report (`make bench`): the MCP layer's own overhead per call with a
# fake runner (a Go benchmark), then mcp-exec-bench against the real engine. Markdown
# on stdout, progress on stderr. Arguments go to mcp-exec-bench (e.g. -quick).
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "## MCP layer overhead per call (fake runner)"
echo
if rev=$(git rev-parse --short HEAD 2>/dev/null); then
  dirty=$(git status --porcelain -- launcher mcpserver cmd/mcp-exec-bench go.mod | wc -l)
  echo "Source: commit $rev$([ "$dirty" -gt 0 ] && echo " with $dirty uncommitted file(s) in launcher, mcpserver, the bench or go.mod")."
  echo
fi
echo "Load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo '```'
go test -run XXX -bench . -benchtime 2s ./mcpserver | grep -E '^(goos|goarch|pkg|cpu|Benchmark|ok|PASS|FAIL)'
echo '```'
echo
go run ./cmd/mcp-exec-bench "$@"
