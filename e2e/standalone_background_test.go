package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestStandaloneBackgroundHTTP: background runs on the process backend (the standalone
// image serving streamable HTTP on an internal network, locked down as
// docs/standalone.md says), where a run goes through the one execution slot: a 20 s run
// outlives the client process that started it (killed) and a new client fetches its
// result; run_wait's tail grows while it runs; a timeout and an out-of-memory program
// (RLIMIT_DATA: MemoryError) come back as results; a result expires after
// --run-ttl-s. (Cancel killing a run's whole tree: TestStandaloneBackground.)
func TestStandaloneBackgroundHTTP(t *testing.T) {
	img := saImage(t)
	network := fmt.Sprintf("mcpx-standalone-bg-%d", os.Getpid())
	if out, err := exec.Command("docker", "network", "create", "--internal", "--subnet", "10.213.80.0/24", network).CombinedOutput(); err != nil {
		t.Fatalf("creating network: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", network).Run() })
	const ttl = 10 * time.Second
	token := e2e.Random()
	name := saName(t)
	args := append([]string{"run", "-d", "--name", name}, replaced(saLocked, "--network", network)...)
	args = append(args, "--ip", "10.213.80.10", "-e", "MCP_EXEC_TRANSPORT=http", "-e", "MCP_EXEC_STANDALONE_EGRESS_DENIED=true",
		"-e", "MCP_EXEC_AUTH_TOKEN_SHA256="+tokenSHA256(token), "-e", fmt.Sprintf("MCP_EXEC_RUN_TTL_S=%d", int(ttl/time.Second)), img)
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("starting: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("server log:\n%s", out)
		}
	})
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, _ := exec.Command("docker", "logs", name).CombinedOutput()
		if strings.Contains(string(out), `"message":"serving"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving after 90 s:\n%s", out)
		}
	}
	endpoint := "http://10.213.80.10:8080/mcp"
	connect := func() *mcp.ClientSession {
		t.Helper()
		s, err := mcp.NewClient(&mcp.Implementation{Name: "standalone-bg", Version: "0"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: e2e.HeaderTransport{Token: token}}}, nil)
		if err != nil {
			t.Fatalf("connecting: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}

	p, err := bgStartInProcess(t.Context(), endpoint, token, map[string]any{
		"code":      "import time\nfor i in range(20):\n    print('tick', i, flush=True)\n    time.sleep(1)\nopen('outputs/done.txt', 'w').write('ok')",
		"timeout_s": 90,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := p.ID
	time.Sleep(2 * time.Second)
	p.Kill()
	second := connect()
	var tails []string
	for len(tails) < 2 {
		r, res := bgCall(t, second, "run_wait", map[string]any{"run_id": id, "timeout_s": 2})
		if res.IsError || r.Status != "running" {
			t.Fatalf("run_wait while running: %+v %v", r, res.Content)
		}
		if r.StdoutTail != "" && (len(tails) == 0 || r.StdoutTail != tails[len(tails)-1]) {
			tails = append(tails, r.StdoutTail)
		}
	}
	if !strings.HasPrefix(tails[1], tails[0]) || len(tails[1]) <= len(tails[0]) || !strings.HasPrefix(tails[0], "tick 0\n") {
		t.Errorf("stdout tails %q, want a growing tail from tick 0", tails)
	}
	second.Close()
	cs := connect()
	r, res := bgWait(t, cs, id, 90*time.Second)
	fetched := time.Now()
	var want strings.Builder
	for i := range 20 {
		fmt.Fprintf(&want, "tick %d\n", i)
	}
	if res.IsError || r.Stdout != want.String() || r.ExitCode != 0 || len(r.Files) != 1 || r.Files[0].Name != "done.txt" {
		t.Fatalf("the result fetched by a new client: %+v %v", r, res.Content)
	}

	tid := bgStart(t, cs, map[string]any{"code": "import time\nprint('start', flush=True)\ntime.sleep(60)", "timeout_s": 2})
	oid := bgStart(t, cs, map[string]any{"code": "b = bytearray(1024 * 1024 * 1024)\nprint('survived')", "timeout_s": 30})
	if r, res := bgWait(t, cs, tid, 60*time.Second); res.IsError || !r.TimedOut || r.Stdout != "start\n" {
		t.Errorf("timeout: %+v %v", r, res.Content)
	}
	if _, res := bgWait(t, cs, oid, 60*time.Second); res.IsError || !strings.Contains(toolText(res), "MemoryError") || strings.Contains(toolText(res), "survived") {
		t.Errorf("out of memory: %v", toolText(res))
	}

	time.Sleep(time.Until(fetched.Add(ttl + time.Second)))
	_, res = bgCall(t, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 0})
	if text := toolText(res); !res.IsError || !strings.Contains(text, "expired") || !strings.Contains(text, "run-ttl-s") {
		t.Errorf("run_wait after the TTL: isError %v %q, want expired, naming run-ttl-s", res.IsError, text)
	}
}
