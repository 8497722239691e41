package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// healthcheck is `mcp-exec healthcheck`, for compose healthchecks and for stdio
// deployments: with http or sse it asks the local server's /readyz; with stdio, where
// there is no server to ask, it checks the engine and the image itself. It never
// touches containers.
func healthcheck(ctx context.Context, cfg config.Config, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cfg.Transport == "stdio" && cfg.Backend == "process" {
		// Standalone over stdio: the server is the container's PID 1 and its stdin
		// is the client's; while the container runs, the server does.
		return 0
	}
	if cfg.Transport == "stdio" {
		if err := checkEngine(ctx, cfg); err != nil {
			fmt.Fprintf(stderr, "unhealthy: %s\n", backend.Spell(err, config.Var))
			return 1
		}
		return 0
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		fmt.Fprintf(stderr, "unhealthy: bad --addr %q: %v\n", cfg.Addr, err)
		return 1
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "unhealthy: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "unhealthy: %s: %s", resp.Status, body)
		return 1
	}
	return 0
}
