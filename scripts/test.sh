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
# One package at a time: several tests time real sandboxes, and two cores are few.
go test -race -count=1 -p 1 -timeout 30m ./...

step "launcher suite again, with a warm pool"
MCP_EXEC_TEST_POOL_SIZE=2 go test -race -count=1 -timeout 20m ./launcher/...

step "engine restart (stops and restarts dockerd)"
go test -tags enginefault -count=1 -timeout 5m -run '^TestEngineRestart$' ./launcher

step "remote engines: tcp:// with TLS (a second dockerd on 127.0.0.1) and ssh:// (an sshd on 127.0.0.1)"
bash scripts/remote-test.sh

# Other engines and runtimes (docs/engines.md). The Podman suites are opt-in
# (MCP_EXEC_WITH_PODMAN=1) until the fixes in docs/patches/podman-fixes.patch land:
# without them Podman 4.3 rejects the inline seccomp profile. MCP_EXEC_SKIP_CRUN=1
# skips the crun suite.
if [ -n "${MCP_EXEC_WITH_PODMAN:-}" ]; then
  step "podman (rootful): set-up, then the launcher suite against its Docker-compatible API"
  bash scripts/podman.sh >/dev/null
  DOCKER_HOST=unix:///run/podman/podman.sock go test -race -count=1 -timeout 20m ./launcher/...
  left=$(podman ps -aq --filter label=dev.mcp-exec.role=sandbox | wc -l)
  if [ "$left" != 0 ]; then
    echo "$left sandbox containers were left in podman:"; podman ps -a --filter label=dev.mcp-exec.role=sandbox; exit 1
  fi

  if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]; then
    step "podman (rootless, cgroup v1): sandboxes run, and the dropped limits are reported"
    bash scripts/podman.sh --rootless >/dev/null
    DOCKER_HOST=unix:///run/user/$(id -u mcp-exec-rootless)/podman/podman.sock MCP_EXEC_TEST_EXPECT_UNENFORCED=1 \
      go test -race -count=1 -timeout 10m \
      -run '^(TestVerifyLimitsUnenforcedLive|TestRunPrograms|TestTimeoutKillsProcessTree|TestEngineNameLive)$' ./launcher
  fi
fi

if [ -z "${MCP_EXEC_SKIP_CRUN:-}" ]; then
  step "crun: registered with dockerd (SIGHUP, no restart), then the sandbox tests under it"
  bash scripts/crun.sh
  MCP_EXEC_TEST_RUNTIME=crun go test -race -count=1 -timeout 20m \
    -run '^(TestRuntimeLive|TestRunPrograms|TestTimeoutKillsProcessTree|TestVerifyLimits|TestInvariants|TestKilledFromOutside|TestCancelRemovesContainer|TestCloseEndsRuns)$' ./launcher
fi

step "short fuzz"
go test ./launcher -run '^$' -fuzz '^FuzzCapture$' -fuzztime "${FUZZTIME:-10s}"
go test ./launcher -run '^$' -fuzz '^FuzzDecoder$' -fuzztime "${FUZZTIME:-10s}"

step "compose (server image, docker-compose up, the e2e client, down)"
bash scripts/compose-test.sh

step "leftover containers"
left=$(docker ps -aq --filter label=dev.mcp-exec.role=sandbox | wc -l)
if [ "$left" != 0 ]; then
  echo "$left sandbox containers were left behind:"; docker ps -a --filter label=dev.mcp-exec.role=sandbox; exit 1
fi
echo "no sandbox container left"
