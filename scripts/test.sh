#!/usr/bin/env bash
# The project's test command (`make test`), also what CI runs. It installs and starts
# what the tests need when it is missing (the engine, the base and sandbox images), so
# it works on a fresh machine, and does nothing extra when they are there.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

step() { printf '\n== %s\n' "$*"; }

step "engine"
bash scripts/engine.sh
step "images"
bash scripts/images.sh

step "gofmt"
unformatted=$(gofmt -l . | grep -v '^vendor/' || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
step "go mod tidy -diff"
go mod tidy -diff
step "go vet"
go vet ./...

step "go test -race"
# CI=true turns a missing engine into a failure instead of a skip.
export CI=${CI:-}
go test -race -count=1 -timeout 20m ./...

step "launcher suite again, with a warm pool"
MCP_EXEC_TEST_POOL_SIZE=2 go test -race -count=1 -timeout 20m ./launcher/...

step "engine restart (stops and restarts dockerd)"
go test -tags enginefault -count=1 -timeout 5m -run '^TestEngineRestart$' ./launcher

step "short fuzz"
go test ./launcher -run '^$' -fuzz '^FuzzCapture$' -fuzztime "${FUZZTIME:-10s}"
go test ./launcher -run '^$' -fuzz '^FuzzDecoder$' -fuzztime "${FUZZTIME:-10s}"

step "leftover containers"
left=$(docker ps -aq --filter label=dev.mcp-exec.role=sandbox | wc -l)
if [ "$left" != 0 ]; then
  echo "$left sandbox containers were left behind:"; docker ps -a --filter label=dev.mcp-exec.role=sandbox; exit 1
fi
echo "no sandbox container left"
