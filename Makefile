# mcp-exec: `make help` lists the targets.
SHELL := /bin/bash
BIN   := bin/mcp-exec
IMAGE := $(shell cat images/python-sandbox/TAG)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: help serve test build engine image fuzz bench lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

serve: build engine image ## start the engine if needed, build the image if missing, serve over stdio (pass ARGS=...)
	@./$(BIN) $(ARGS)

test: ## everything CI runs: engine, images, gofmt, vet, tidy, go test -race (with the real engine), short fuzz
	bash scripts/test.sh

build: ## build bin/mcp-exec
	@go build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/mcp-exec

engine: ## make sure a Docker engine answers (installs docker.io and starts dockerd when root)
	@bash scripts/engine.sh

image: engine ## build the sandbox image if it is missing
	@bash scripts/images.sh

fuzz: ## fuzz the output capture and the frame decoder for FUZZTIME each (default 30s)
	go test ./launcher -run '^$$' -fuzz '^FuzzCapture$$' -fuzztime $${FUZZTIME:-30s}
	go test ./launcher -run '^$$' -fuzz '^FuzzDecoder$$' -fuzztime $${FUZZTIME:-30s}

clean: ## remove build output
	rm -rf bin
