# mcp-exec: `make help` lists the targets.
SHELL := /bin/bash
BIN   := bin/mcp-exec
IMAGE := $(shell cat images/python-sandbox/TAG)
# What the binary, the handshake's serverInfo and the images report: scripts/version.sh.
VERSION ?= $(shell bash scripts/version.sh)

.PHONY: help serve test build release engine image fuzz soak bench bench-client lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

serve: build engine image ## start the engine if needed, build the image if missing, serve over stdio (pass ARGS=...)
	@./$(BIN) $(ARGS)

test: ## everything CI runs: engine, images, gofmt, vet, tidy, go test -race (with the real engine), short fuzz
	bash scripts/test.sh

build: ## build bin/mcp-exec
	@test -n "$(VERSION)"
	@go build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/mcp-exec

release: ## static binaries for linux/amd64 and arm64 in dist/, SHA256SUMS, SBOMs; fails unless a second build is byte-identical
	bash scripts/release.sh

engine: ## make sure a Docker engine answers (installs docker.io and starts dockerd when root)
	@bash scripts/engine.sh

image: engine ## build the sandbox image if it is missing
	@bash scripts/images.sh

lint: ## staticcheck, govulncheck and shellcheck (installs them when missing)
	bash scripts/lint.sh

fuzz: ## fuzz the output capture, the frame decoder, code mode's call reader and the egress checks for FUZZTIME each (default 30s)
	go test ./launcher -run '^$$' -fuzz '^FuzzCapture$$' -fuzztime $${FUZZTIME:-30s}
	go test ./launcher -run '^$$' -fuzz '^FuzzDecoder$$' -fuzztime $${FUZZTIME:-30s}
	go test ./mcpserver/upstream -run '^$$' -fuzz '^FuzzReadCall$$' -fuzztime $${FUZZTIME:-30s}
	go test ./launcher/egress -run '^$$' -fuzz '^FuzzAllowName$$' -fuzztime $${FUZZTIME:-30s}
	go test ./launcher/egress -run '^$$' -fuzz '^FuzzVet$$' -fuzztime $${FUZZTIME:-30s}

soak: engine image ## background runs for SOAK (default 10m, 200 runs) under clients killed, a server SIGKILL and an engine restart, on a private dockerd (root; docs/background-runs.md)
	@eval "$$(bash scripts/fault-engine.sh start)"; \
	MCP_EXEC_SOAK=$${SOAK:-10m} MCP_EXEC_TEST_FAULT_HOST=$$MCP_EXEC_TEST_FAULT_HOST \
	MCP_EXEC_TEST_FAULT_DOWN="bash $$PWD/scripts/fault-engine.sh down" \
	MCP_EXEC_TEST_FAULT_UP="bash $$PWD/scripts/fault-engine.sh up" \
	go test -tags enginefault -count=1 -timeout 60m -v -run '^TestBackgroundSoak$$' ./e2e; rc=$$?; \
	bash scripts/fault-engine.sh stop; exit $$rc

bench: engine image ## measure latency and throughput on the real engine, several minutes (BENCH_ARGS=-quick: a smoke run)
	@bash cmd/mcp-exec-bench/report.sh $(BENCH_ARGS)

bench-client: engine image ## speed as a client sees it: the built binary over stdio through the TypeScript SDK, ratios vs baselines in one interleaved run, about 5 min (BENCH_ARGS=--quick: a smoke run)
	@bash cmd/mcp-exec-bench/client.sh $(BENCH_ARGS)

.PHONY: server-image compose-up compose-down compose-test
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

server-image: engine ## build the server image mcp-exec/server:latest (offline too: seeds a Go toolchain image from the host's Go)
	@bash scripts/images.sh --server

compose-up: engine image ## build and start compose.yaml on 127.0.0.1:8080 (MCP_EXEC_PORT, MCP_EXEC_AUTH_TOKEN: docs/deploy.md)
	DOCKER_GID=$${DOCKER_GID:-$$(stat -c %g /var/run/docker.sock)} \
	MCP_EXEC_GO_IMAGE=$${MCP_EXEC_GO_IMAGE:-$$(bash scripts/images.sh --go-image)} \
	MCP_EXEC_VERSION=$(VERSION) \
	$(COMPOSE) up -d --build

compose-down: ## stop and remove what compose-up started
	$(COMPOSE) down

compose-test: engine ## test compose.yaml end to end: build, up, the e2e client, 401s, token as a secret, down
	bash scripts/compose-test.sh

clean: ## remove build output
	rm -rf bin dist
