package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerTransport adds the auth header to every request.
type headerTransport struct{ token string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-MCP-AUTH", h.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPModeIsolation: while the server serves HTTP on every interface, code run by
// exec reaches neither the server's port (on any of the host's addresses, the engine's
// gateway, or loopback) nor anything else. The test first proves that each of those
// addresses does reach the server from the host, so a sandbox with a network would
// fail it.
func TestHTTPModeIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := e2eBuild(t)
	port, err := e2eFreePort()
	if err != nil {
		t.Fatal(err)
	}
	token := e2eRandom()
	logs := &e2eBuffer{}
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"MCP_EXEC_TRANSPORT=http", "MCP_EXEC_ADDR=0.0.0.0:" + strconv.Itoa(port),
		"MCP_EXEC_AUTH_TOKEN=" + token, "MCP_EXEC_INSTANCE=test-isolation", "MCP_EXEC_POOL_SIZE=0",
	}
	for _, k := range []string{"DOCKER_HOST", "MCP_EXEC_IMAGE"} {
		if v := os.Getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})

	// Every address of this host, plus the engine's default gateway.
	targets := []string{"127.0.0.1", "172.17.0.1"}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			targets = append(targets, ipn.IP.String())
		}
	}
	var reachable []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening; log:\n%s", logs.String())
		}
	}
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
		HTTPClient: &http.Client{Transport: headerTransport{token}},
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
