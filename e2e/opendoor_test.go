package e2e_test

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestOpenDoorBinary: the real binary, on every interface without authentication,
// exits 1 before touching the engine, naming the flag; with MCP_EXEC_INSECURE_NO_AUTH
// it serves there; on loopback it serves without the flag.
func TestOpenDoorBinary(t *testing.T) {
	bin := e2e.Build(t)
	port, err := e2e.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	// No engine at all: the refusal must come first.
	cmd.Env = []string{"MCP_EXEC_TRANSPORT=http", "MCP_EXEC_ADDR=:" + strconv.Itoa(port), "DOCKER_HOST=unix:///nonexistent.sock"}
	out, err := cmd.CombinedOutput()
	if code := e2e.ExitCode(err); code != 1 || !strings.Contains(string(out), "--insecure-no-auth (MCP_EXEC_INSECURE_NO_AUTH)") ||
		!strings.Contains(string(out), "refusing to serve http on :"+strconv.Itoa(port)+" without authentication") {
		t.Errorf("on every interface without a token: exit %d, output:\n%s\nwant exit 1 and the refusal naming the flag", code, out)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on the refused port %d", port)
	}

	open := e2e.ServeOn(t, "0.0.0.0", bin, e2e.Env("MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_INSECURE_NO_AUTH=true"), "http", "test-open-door", "")
	if !strings.Contains(open.Logs.String(), "UNSAFE: serving beyond loopback WITHOUT authentication") {
		t.Errorf("served open without the UNSAFE line:\n%s", open.Logs.String())
	}
	loop := e2e.Serve(t, bin, e2e.Env("MCP_EXEC_POOL_SIZE=0"), "http", "test-open-door-lo", "")
	for _, s := range []*e2e.Server{open, loop} {
		resp, err := http.Get(s.Base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: /healthz %d", s.Instance, resp.StatusCode)
		}
	}
}
