package e2e_test

// Background runs on the real binary over streamable HTTP, on the engine and runtime
// of the test's environment (scripts/test.sh: Docker with runc, Podman, gVisor): a
// 20 s run outlives the client process that started it (killed) and a new client
// fetches its result by handle; run_wait's stdout tail grows while it runs;
// run_cancel kills it and leaves no sandbox; a timeout and an OOM kill come back as
// results; a result expires after --run-ttl-s ("expired"); another identity's handle
// is "not found", as one that never was; at shutdown a run in flight is killed within
// the grace and nothing is left on the engine. Skipped with -short; outside CI a
// missing engine skips.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

type bgResult struct {
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	ExpiresAt  string `json:"expires_at"`
	StdoutTail string `json:"stdout_tail"`
	Stdout     string `json:"stdout"`
	ExitCode   int    `json:"exit_code"`
	TimedOut   bool   `json:"timed_out"`
	OOMKilled  bool   `json:"oom_killed"`
	Files      []struct {
		Name string `json:"name"`
	} `json:"files"`
}

func bgCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (bgResult, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var r bgResult
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &r)
	return r, res
}

func bgStart(t *testing.T, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	args["background"] = true
	t0 := time.Now()
	r, res := bgCall(t, cs, "exec", args)
	if res.IsError || r.Status != "running" || !strings.HasPrefix(r.RunID, "run_") || r.ExpiresAt == "" {
		t.Fatalf("exec background: %+v %v", r, res.Content)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("exec background answered after %s, want at once", d)
	}
	return r.RunID
}

// bgWait calls run_wait until the run has ended, up to limit.
func bgWait(t *testing.T, cs *mcp.ClientSession, id string, limit time.Duration) (bgResult, *mcp.CallToolResult) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r, res := bgCall(t, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 5})
		if res.IsError || r.Status == "completed" {
			return r, res
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still running after %s: %+v", limit, r)
		}
	}
}

// bgTTL is TestBackgroundRunsE2E's --run-ttl-s: results must stay through its
// subtests' waits (a few seconds each) and expire within the test.
const bgTTL = 15 * time.Second

func TestBackgroundRunsE2E(t *testing.T) {
	e2e.SkipShort(t)
	bin, env := protoSetup(t, "MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_MAX_SESSIONS=0", "MCP_EXEC_SHUTDOWN_GRACE_S=2",
		"MCP_EXEC_RUN_TTL_S="+strconv.Itoa(int(bgTTL/time.Second)))
	instance := "bg-" + strconv.Itoa(os.Getpid())
	srv := e2e.Serve(t, bin, env, "http", instance, e2e.Random())

	var expiring string // a result fetched, and when: run_wait answers "expired" after the TTL
	var fetchedAt time.Time
	t.Run("outlives its client process", func(t *testing.T) {
		// A 20 s run started by a client process, which is killed in its run_wait.
		p, err := bgStartInProcess(t.Context(), srv.Endpoint, srv.Token, map[string]any{
			"code":      "import time\nfor i in range(20):\n    print('tick', i, flush=True)\n    time.sleep(1)\nopen('outputs/done.txt', 'w').write('ok')",
			"timeout_s": 90,
		})
		if err != nil {
			t.Fatal(err)
		}
		id := p.ID
		time.Sleep(2 * time.Second)
		p.Kill()

		// A new client: the tail grows while it runs, seen with short run_waits.
		second := srv.Connect(t, nil, nil)
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

		third := srv.Connect(t, nil, nil) // another client, another MCP session
		r, res := bgWait(t, third, id, 90*time.Second)
		var want strings.Builder
		for i := range 20 {
			fmt.Fprintf(&want, "tick %d\n", i)
		}
		if res.IsError || r.Stdout != want.String() || r.ExitCode != 0 || len(r.Files) != 1 || r.Files[0].Name != "done.txt" || r.RunID != id {
			t.Fatalf("the result fetched by a new client: %+v %v", r, res.Content)
		}
		expiring, fetchedAt = id, time.Now()
		if again, _ := bgCall(t, third, "run_wait", map[string]any{"run_id": id, "timeout_s": 0}); again.Stdout != want.String() {
			t.Errorf("a second run_wait: %+v, want the same result", again)
		}
	})

	cs := srv.Connect(t, nil, nil)
	t.Run("cancel", func(t *testing.T) {
		id := bgStart(t, cs, map[string]any{"code": "import time\nprint('started', flush=True)\ntime.sleep(120)", "timeout_s": 300})
		for {
			r, res := bgCall(t, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 1})
			if res.IsError || r.Status != "running" {
				t.Fatalf("run_wait: %+v %v", r, res.Content)
			}
			if r.StdoutTail == "started\n" {
				break
			}
		}
		if n, _ := e2e.Containers(instance); n != 1 {
			t.Errorf("%d containers while the run runs, want 1", n)
		}
		t0 := time.Now()
		if _, res := bgCall(t, cs, "run_cancel", map[string]any{"run_id": id}); res.IsError || res.StructuredContent.(map[string]any)["canceled"] != true {
			t.Fatalf("run_cancel: %v", res.Content)
		}
		if _, res := bgCall(t, cs, "run_cancel", map[string]any{"run_id": id}); res.IsError || res.StructuredContent.(map[string]any)["canceled"] != false {
			t.Fatalf("run_cancel again: %v", res.Content)
		}
		_, res := bgCall(t, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 0})
		if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "cancelled") {
			t.Errorf("run_wait after cancel: %v", res.Content[0])
		}
		for {
			n, err := e2e.Containers(instance)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Logf("sandbox removed %s after run_cancel", time.Since(t0).Round(time.Millisecond))
				break
			}
			if time.Since(t0) > 30*time.Second {
				t.Fatalf("%d containers 30 s after run_cancel, want 0", n)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("timeout and OOM are results", func(t *testing.T) {
		tid := bgStart(t, cs, map[string]any{"code": "import time\nprint('start', flush=True)\ntime.sleep(60)", "timeout_s": 2})
		oid := bgStart(t, cs, map[string]any{"code": "b = bytearray(1024 * 1024 * 1024)\nprint('survived')", "timeout_s": 30})
		if r, res := bgWait(t, cs, tid, 60*time.Second); res.IsError || !r.TimedOut || r.ExitCode != 137 || r.Stdout != "start\n" {
			t.Errorf("timeout: %+v %v", r, res.Content)
		}
		if r, res := bgWait(t, cs, oid, 60*time.Second); res.IsError || r.ExitCode != 137 || r.TimedOut || strings.Contains(r.Stdout, "survived") {
			t.Errorf("OOM: %+v %v", r, res.Content)
		}
	})

	t.Run("another identity", func(t *testing.T) {
		// Identities are OAuth's (with the static token every client is one): a server
		// of its own, and two users of one issuer.
		is := newOAuthIssuer(t)
		_, oenv := protoSetup(t, "MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_MAX_SESSIONS=0", "MCP_EXEC_OAUTH_ISSUER="+is.URL,
			"MCP_EXEC_OAUTH_RESOURCE="+oauthResource, "MCP_EXEC_OAUTH_SCOPES=mcp:exec")
		osrv := e2e.Serve(t, bin, oenv, "http", instance+"-oauth", "")
		as := func(sub string) *mcp.ClientSession {
			hc := &http.Client{Transport: bearerTransport{is.token(t, sub, nil), http.DefaultTransport}}
			s, err := mcp.NewClient(&mcp.Implementation{Name: sub, Version: "1"}, nil).
				Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: osrv.Endpoint, HTTPClient: hc}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		alice, bob := as("alice"), as("bob")
		id := bgStart(t, alice, map[string]any{"code": "import time\ntime.sleep(3)\nprint('alice')"})
		never := id[:len(id)-4] + map[bool]string{true: "AAAA", false: "BBBB"}[!strings.HasSuffix(id, "AAAA")]
		_, res := bgCall(t, bob, "run_wait", map[string]any{"run_id": never, "timeout_s": 0})
		unknown := toolText(res)
		if !res.IsError || !strings.Contains(unknown, "not found") {
			t.Fatalf("run_wait of a handle that never was: %q, want not found", unknown)
		}
		// While alice's run runs: were bob's run_cancel obeyed, her result would be lost.
		for _, tool := range []string{"run_wait", "run_cancel"} {
			args := map[string]any{"run_id": id}
			if tool == "run_wait" {
				args["timeout_s"] = 0
			}
			_, res := bgCall(t, bob, tool, args)
			if !res.IsError || toolText(res) != unknown {
				t.Errorf("%s of alice's run by bob: isError %v %q, want what a handle that never was gets: %q", tool, res.IsError, toolText(res), unknown)
			}
		}
		if r, res := bgWait(t, alice, id, 60*time.Second); res.IsError || r.Stdout != "alice\n" {
			t.Errorf("alice's result after bob's tries: %+v %v", r, res.Content)
		}
		osrv.Stop(t)
	})

	t.Run("expired", func(t *testing.T) {
		if expiring == "" {
			t.Skip("no result was fetched")
		}
		time.Sleep(time.Until(fetchedAt.Add(bgTTL + time.Second)))
		_, res := bgCall(t, cs, "run_wait", map[string]any{"run_id": expiring, "timeout_s": 0})
		if text := toolText(res); !res.IsError || !strings.Contains(text, "expired") || !strings.Contains(text, "run-ttl-s") {
			t.Errorf("run_wait after the TTL: isError %v %q, want expired, naming run-ttl-s", res.IsError, text)
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		id := bgStart(t, cs, map[string]any{"code": "import time\nprint('started', flush=True)\ntime.sleep(120)", "timeout_s": 300})
		for {
			r, _ := bgCall(t, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 1})
			if r.StdoutTail == "started\n" {
				break
			}
		}
		t0 := time.Now()
		srv.Stop(t) // SIGTERM: a clean exit within the grace, and no container left (Stop checks)
		t.Logf("stopped %s after SIGTERM", time.Since(t0).Round(time.Millisecond))
		if d := time.Since(t0); d > 30*time.Second {
			t.Errorf("the server took %s to stop with a background run in flight (grace 2 s)", d)
		}
		if logs := srv.Logs.String(); strings.Contains(logs, id) || strings.Contains(logs, id[4:20]) {
			t.Error("the server's log holds a run's handle")
		}
	})
}

// TestStandaloneBackground: the process backend (the standalone image over stdio) offers
// the same tools: a run in the background completes and run_wait gives its result;
// run_cancel kills the run's whole tree (a child it started included), and the next run
// finds none of it.
func TestStandaloneBackground(t *testing.T) {
	s := saSession(t, saImage(t))
	id := bgStart(t, s, map[string]any{"code": "print('ok')"})
	if r, res := bgWait(t, s, id, 60*time.Second); res.IsError || r.Stdout != "ok\n" || r.Status != "completed" {
		t.Fatalf("run_wait: %+v %v", r, res.Content)
	}

	id = bgStart(t, s, map[string]any{
		"code":      "import subprocess, time\nsubprocess.Popen(['sleep', '313'])\nprint('started', flush=True)\ntime.sleep(300)",
		"timeout_s": 600,
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		r, res := bgCall(t, s, "run_wait", map[string]any{"run_id": id, "timeout_s": 1})
		if res.IsError || r.Status != "running" || time.Now().After(deadline) {
			t.Fatalf("run_wait: %+v %v", r, res.Content)
		}
		if r.StdoutTail == "started\n" {
			break
		}
	}
	if _, res := bgCall(t, s, "run_cancel", map[string]any{"run_id": id}); res.IsError || res.StructuredContent.(map[string]any)["canceled"] != true {
		t.Fatalf("run_cancel: %v", res.Content)
	}
	r := saExec(t, s, "import os\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n        try:\n            c = open(f'/proc/{p}/cmdline', 'rb').read()\n        except OSError:\n            continue\n        if b'313' in c:\n            print('left:', c)", 30)
	if r.Stdout != "" {
		t.Errorf("after run_cancel: %q, want no process of the cancelled run", r.Stdout)
	}
}
