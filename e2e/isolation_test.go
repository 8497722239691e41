package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestHTTPModeIsolation: while the server serves HTTP on every interface, code run by
// exec reaches neither the server's port (on any of the host's addresses, the engine's
// gateway, or loopback) nor anything else. The test first proves that each of those
// addresses does reach the server from the host, so a sandbox with a network would
// fail it.
func TestHTTPModeIsolation(t *testing.T) {
	bin := e2e.Build(t)
	token := e2e.Random()
	port := e2e.ServeOn(t, "0.0.0.0", bin, e2e.Env("MCP_EXEC_POOL_SIZE=0"), "http", "test-isolation", token).Port

	// Every address of this host, plus the engine's default gateway.
	targets := []string{"127.0.0.1", "172.17.0.1"}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			targets = append(targets, ipn.IP.String())
		}
	}
	var reachable []string
	for _, ip := range targets {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), time.Second); err == nil {
			c.Close()
			reachable = append(reachable, ip)
		}
	}
	if len(reachable) < 2 {
		t.Fatalf("from the host the server is reachable only at %v: the test would prove little", reachable)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "isolation-test", Version: "0"}, nil)
	session, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   fmt.Sprintf("http://127.0.0.1:%d/mcp", port),
		HTTPClient: &http.Client{Transport: e2e.HeaderTransport{Token: token}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()

	list, _ := json.Marshal(reachable)
	code := fmt.Sprintf(`
import socket
reached = []
for ip in %s + ["1.1.1.1", "8.8.8.8"]:
    try:
        socket.create_connection((ip, %d), timeout=3).close()
        reached.append(ip)
    except OSError as e:
        print(ip, "blocked:", e)
print("REACHED", reached)
`, list, port)
	res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": code}})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exit_code"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || res.IsError {
		t.Fatalf("exec: isError %v, %s (%v)", res.IsError, b, err)
	}
	if !strings.Contains(out.Stdout, "REACHED []") {
		t.Errorf("the sandbox reached something: %s%s", out.Stdout, out.Stderr)
	}
	t.Logf("host reaches the server at %v; from the sandbox:\n%s", reachable, out.Stdout)
}
