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
go vet -tags enginefault,remoteengine ./...

step "lint: staticcheck, shellcheck, govulncheck (scripts/lint.sh)"
# 15-33 s with the tools installed (measured on the shared 2-core machine); the first
# run also installs staticcheck and govulncheck: +4 s measured with a warm Go build
# cache (a cold one was not measured: it compiles both tools).
bash scripts/lint.sh

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

# Other engines and runtimes (docs/engines.md). CI runs all of them. On a machine
# without Podman (or where it must not be installed), MCP_EXEC_WITH_PODMAN=0 leaves the
# Podman steps out; CI refuses that. MCP_EXEC_SKIP_CRUN=1 skips the crun suite.
if [ "${MCP_EXEC_WITH_PODMAN:-1}" = 0 ] && [ -n "$CI" ]; then
  echo "MCP_EXEC_WITH_PODMAN=0 with CI set: CI must run the Podman suites"; exit 1
fi
if [ "${MCP_EXEC_WITH_PODMAN:-1}" != 0 ]; then
  step "podman (rootful): set-up, then the launcher suite against its Docker-compatible API"
  # About 50 s the first time (the sandbox image is copied from Docker), then nothing.
  bash scripts/podman.sh >/dev/null
  podman_host=unix:///run/podman/podman.sock
  # Includes TestStdinUnreadStress, which runs against Podman.
  DOCKER_HOST=$podman_host go test -race -count=1 -timeout 20m ./launcher/...

  step "podman (rootful): launcher suite again, with a warm pool"
  DOCKER_HOST=$podman_host MCP_EXEC_TEST_POOL_SIZE=2 go test -race -count=1 -timeout 20m ./launcher/...

  step "podman (rootful): mcp-exec selftest"
  DOCKER_HOST=$podman_host go run ./cmd/mcp-exec selftest --log-level warn

  left=$(podman ps -aq --filter label=dev.mcp-exec.role=sandbox | wc -l)
  if [ "$left" != 0 ]; then
    echo "$left sandbox containers were left in podman:"; podman ps -a --filter label=dev.mcp-exec.role=sandbox; exit 1
  fi

  if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]; then
    step "podman (rootless, cgroup v1): sandboxes run, the dropped limits are reported, the server refuses"
    bash scripts/podman.sh --rootless >/dev/null
    ruser=${MCP_EXEC_ROOTLESS_USER:-mcp-exec-rootless}
    ruid=$(id -u "$ruser")
    DOCKER_HOST=unix:///run/user/$ruid/podman/podman.sock MCP_EXEC_TEST_EXPECT_UNENFORCED=1 \
      go test -race -count=1 -p 1 -timeout 10m \
      -run '^(TestVerifyLimitsUnenforcedLive|TestRunPrograms|TestTimeoutKillsProcessTree|TestEngineNameLive|TestUnenforcedLimitsLive)$' \
      ./launcher ./launcher/engine ./cmd/mcp-exec
    left=$(runuser -u "$ruser" -- env XDG_RUNTIME_DIR="/run/user/$ruid" \
      podman ps -aq --filter label=dev.mcp-exec.role=sandbox | wc -l)
    if [ "$left" != 0 ]; then
      echo "$left sandbox containers were left in $ruser's podman"; exit 1
    fi
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
