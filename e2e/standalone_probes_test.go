package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestStandaloneProbesTellProgramsNothing: in standalone mode over HTTP (the docs'
// docker run line, a token digest, an internal network), a program shares the
// server's network and so reaches its port: /readyz tells it "ready" and nothing more,
// /metrics refuses it, while the client with the token reads both.
func TestStandaloneProbesTellProgramsNothing(t *testing.T) {
	img := saImage(t)
	net := fmt.Sprintf("mcpx-standalone-probes-%d", os.Getpid())
	if out, err := exec.Command("docker", "network", "create", "--internal", "--subnet", "10.213.91.0/24", net).CombinedOutput(); err != nil {
		t.Fatalf("creating network: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", net).Run() })
	token := e2e.Random()
	name := saName(t)
	args := append([]string{"run", "-d", "--name", name}, replaced(saLocked, "--network", net)...)
	args = append(args, "--ip", "10.213.91.10", "-e", "MCP_EXEC_TRANSPORT=http",
		"-e", "MCP_EXEC_STANDALONE_EGRESS_DENIED=true", "-e", "MCP_EXEC_AUTH_TOKEN_SHA256="+tokenSHA256(token), img)
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("starting: %v: %s", err, out)
	}
	base := "http://10.213.91.10:8080"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, _ := exec.Command("docker", "logs", name).CombinedOutput()
		if strings.Contains(string(out), `"message":"serving"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving after 60 s:\n%s", out)
		}
	}
	hc := &http.Client{Transport: bearerTransport{token, http.DefaultTransport}, Timeout: 30 * time.Second}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "probes-test", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	const program = `
import urllib.request, urllib.error
for path in ("/readyz", "/metrics", "/healthz"):
    try:
        r = urllib.request.urlopen("http://127.0.0.1:8080" + path, timeout=10)
        body = r.read().decode()
        print(path, r.status, repr(body[:200]), len(body))
    except urllib.error.HTTPError as e:
        print(path, e.code, repr(e.read().decode()[:200]))
`
	res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": program}})
	if err != nil || res.IsError {
		t.Fatalf("exec: %v %q", err, toolText(res))
	}
	out := toolText(res)
	t.Logf("the program read:\n%s", out)
	for _, want := range []string{`/readyz 200 'ready\n' 6`, `/metrics 401 'Unauthorized\n'`, `/healthz 200 'ok\n'`} {
		if !strings.Contains(out, want) {
			t.Errorf("the program's view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "mcp_exec_") {
		t.Errorf("the program read the metrics:\n%s", out)
	}
	// The client with the token reads both.
	for path, want := range map[string]string{"/metrics": "mcp_exec_executions_total", "/readyz": "ready"} {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s with the token: %s %.100q, want 200 and %q", path, resp.Status, b, want)
		}
	}
}
