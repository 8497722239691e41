package main

import (
	"bytes"
	"net"
	"os"
	"strings"
	"testing"
)

// localNonLoopback returns an IPv4 address of this machine that is not loopback: to
// the insecure-engine check it is "off this machine" (addresses are judged literally),
// and nothing listens on port 1 there, so a connection fails at once.
func localNonLoopback(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no non-loopback IPv4 address on this machine")
	}
	t.Skip("no non-loopback IPv4 address")
	return ""
}

// TestInsecureEngineRefused: plain tcp:// to an address that is not loopback stops the
// server before it connects, naming the override; with the override it is logged as
// an error and the server goes on (here to a port where nothing listens).
func TestInsecureEngineRefused(t *testing.T) {
	host := "tcp://" + localNonLoopback(t) + ":1"
	t.Setenv("DOCKER_HOST", "")
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"run", "--engine-host", host, "-"}, strings.NewReader("print(1)"),
		&bytes.Buffer{}, &stderr, mapEnv(map[string]string{"MCP_EXEC_LOG_FORMAT": "json"}))
	if code == 0 || !strings.Contains(stderr.String(), "refusing plain TCP") || !strings.Contains(stderr.String(), "MCP_EXEC_ALLOW_INSECURE_ENGINE") {
		t.Fatalf("exit %d, stderr %q: want a refusal naming the override", code, stderr.String())
	}

	stderr.Reset()
	code = run(t.Context(), []string{"run", "--engine-host", host, "-"}, strings.NewReader("print(1)"),
		&bytes.Buffer{}, &stderr, mapEnv(map[string]string{"MCP_EXEC_LOG_FORMAT": "json", "MCP_EXEC_ALLOW_INSECURE_ENGINE": "true"}))
	out := stderr.String()
	if code == 0 || !strings.Contains(out, `"level":"error"`) || !strings.Contains(out, "UNSAFE: engine connection to "+host+" is plain TCP") {
		t.Fatalf("exit %d, stderr %q: want the UNSAFE error logged, then a connection failure", code, out)
	}
	if strings.Contains(out, "refusing") {
		t.Errorf("stderr %q: refused despite the override", out)
	}
}
