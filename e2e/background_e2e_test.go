package e2e_test

// Background runs on the real binary over streamable HTTP, on the Docker engine: a run
// outlives the client that started it and a new client fetches its result by handle;
// run_wait's stdout tail grows while it runs; run_cancel kills it and leaves no
// sandbox; a timeout and an OOM kill come back as results; at shutdown a run in
// flight is killed within the grace and nothing is left on the engine. Skipped with
// -short; outside CI a missing engine skips.

import (
	"encoding/json"
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

func TestBackgroundRunsE2E(t *testing.T) {
	e2e.SkipShort(t)
	bin, env := protoSetup(t, "MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_MAX_SESSIONS=0", "MCP_EXEC_MEMORY=64m", "MCP_EXEC_SHUTDOWN_GRACE_S=2")
	instance := "bg-" + strconv.Itoa(os.Getpid())
	srv := e2e.Serve(t, bin, env, "http", instance, e2e.Random())

	t.Run("outlives its client", func(t *testing.T) {
		first := srv.Connect(t, nil, nil)
		id := bgStart(t, first, map[string]any{
			"code":      "import time\nfor i in range(8):\n    print('tick', i, flush=True)\n    time.sleep(1)\nopen('outputs/done.txt', 'w').write('ok')",
			"timeout_s": 60,
		})
		// The tail grows while it runs.
		var tails []string
		for len(tails) < 2 {
			r, res := bgCall(t, first, "run_wait", map[string]any{"run_id": id, "timeout_s": 2})
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
		first.Close()

		second := srv.Connect(t, nil, nil) // a new client, a new MCP session
		r, res := bgWait(t, second, id, 60*time.Second)
		want := "tick 0\ntick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\ntick 7\n"
		if res.IsError || r.Stdout != want || r.ExitCode != 0 || len(r.Files) != 1 || r.Files[0].Name != "done.txt" || r.RunID != id {
			t.Fatalf("the result fetched by a new client: %+v %v", r, res.Content)
		}
		if again, _ := bgCall(t, second, "run_wait", map[string]any{"run_id": id, "timeout_s": 0}); again.Stdout != want {
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
