package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
)

// TestCheckOpenDoor: http/sse without a token or OAuth is refused beyond loopback,
// naming --insecure-no-auth, and served with it (logged as an error); loopback, a
// credential and stdio need no flag.
func TestCheckOpenDoor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*config.Config)
		refused bool
	}{
		{"all interfaces", func(c *config.Config) { c.Addr = ":8080" }, true},
		{"0.0.0.0", func(c *config.Config) { c.Addr = "0.0.0.0:8080" }, true},
		{"[::]", func(c *config.Config) { c.Addr = "[::]:8080" }, true},
		{"a LAN address", func(c *config.Config) { c.Addr = "192.168.1.5:8080" }, true},
		{"a name", func(c *config.Config) { c.Addr = "mcp.example.com:8080" }, true},
		{"sse", func(c *config.Config) { c.Transport, c.Addr = "sse", ":8080" }, true},
		{"127.0.0.1", func(c *config.Config) { c.Addr = "127.0.0.1:8080" }, false},
		{"127.0.0.0/8", func(c *config.Config) { c.Addr = "127.3.2.1:8080" }, false},
		{"::1", func(c *config.Config) { c.Addr = "[::1]:8080" }, false},
		{"localhost", func(c *config.Config) { c.Addr = "LocalHost:8080" }, false},
		{"token", func(c *config.Config) { c.Addr, c.AuthToken = ":8080", config.Secret("t") }, false},
		{"token digest", func(c *config.Config) { c.Addr, c.AuthTokenSHA256 = ":8080", strings.Repeat("a", 64) }, false},
		{"oauth", func(c *config.Config) { c.Addr, c.OAuthIssuer = ":8080", "https://issuer.example.com" }, false},
		{"stdio", func(c *config.Config) { c.Transport, c.Addr = "stdio", ":8080" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Transport = "http"
			tc.edit(&cfg)
			err := checkOpenDoor(cfg, zerolog.Nop())
			if !tc.refused {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "--insecure-no-auth (MCP_EXEC_INSECURE_NO_AUTH)") {
				t.Errorf("got %v, want a refusal naming --insecure-no-auth (MCP_EXEC_INSECURE_NO_AUTH)", err)
			}
			var log bytes.Buffer
			cfg.InsecureNoAuth = true
			if err := checkOpenDoor(cfg, zerolog.New(&log)); err != nil {
				t.Errorf("with --insecure-no-auth: %v", err)
			}
			if !strings.Contains(log.String(), `"level":"error"`) || !strings.Contains(log.String(), "UNSAFE") {
				t.Errorf("with --insecure-no-auth the log says %q, want an UNSAFE error line", log.String())
			}
		})
	}
}

// TestOpenDoorBinary: the real binary, on every interface without authentication,
// exits 1 before touching the engine, naming the flag; with MCP_EXEC_INSECURE_NO_AUTH
// it serves there; on loopback it serves without the flag.
func TestOpenDoorBinary(t *testing.T) {
	bin := e2eBuild(t)
	port, err := e2eFreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	// No engine at all: the refusal must come first.
	cmd.Env = []string{"MCP_EXEC_TRANSPORT=http", "MCP_EXEC_ADDR=:" + strconv.Itoa(port), "DOCKER_HOST=unix:///nonexistent.sock"}
	out, err := cmd.CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "--insecure-no-auth (MCP_EXEC_INSECURE_NO_AUTH)") ||
		!strings.Contains(string(out), "refusing to serve http on :"+strconv.Itoa(port)+" without authentication") {
		t.Errorf("on every interface without a token: exit %d, output:\n%s\nwant exit 1 and the refusal naming the flag", code, out)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on the refused port %d", port)
	}

	open := e2eServeOn(t, "0.0.0.0", bin, e2eEnv("MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_INSECURE_NO_AUTH=true"), "http", "test-open-door", "")
	if !strings.Contains(open.logs.String(), "UNSAFE: serving beyond loopback WITHOUT authentication") {
		t.Errorf("served open without the UNSAFE line:\n%s", open.logs.String())
	}
	loop := e2eServe(t, bin, e2eEnv("MCP_EXEC_POOL_SIZE=0"), "http", "test-open-door-lo", "")
	for _, s := range []*e2eServer{open, loop} {
		resp, err := http.Get(s.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: /healthz %d", s.instance, resp.StatusCode)
		}
	}
}
