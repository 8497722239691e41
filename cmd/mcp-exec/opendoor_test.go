package main

import (
	"bytes"
	"strings"
	"testing"

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
