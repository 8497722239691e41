package e2e_test

// A background run in a session, on the real binary over streamable HTTP and the Docker
// engine: a session loads data, a 10 s background call uses it while the session is busy
// (another call refused), run_wait shows its stdout tail growing and then its result,
// and the next call in the session sees what the run left, though the run outlasted the
// session's idle timeout three times over; session_close during a run stops it and
// removes the session's sandbox. Skipped with -short; outside CI a missing engine skips.

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

func TestBackgroundInSessionE2E(t *testing.T) {
	e2e.SkipShort(t)
	// Idle timeout 3 s, shorter than the 10 s run: the run must keep the session. No
	// pools, so that the instance's containers are the session's.
	bin, env := protoSetup(t, "MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_SESSION_POOL_SIZE=0", "MCP_EXEC_SESSION_IDLE_TIMEOUT_S=3", "MCP_EXEC_SHUTDOWN_GRACE_S=2")
	instance := "bgsess-" + strconv.Itoa(os.Getpid())
	srv := e2e.Serve(t, bin, env, "http", instance, e2e.Random())
	cs := srv.Connect(t, nil, nil)

	create := func(t *testing.T) string {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "session_create", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("session_create: %v %v", err, res)
		}
		return res.StructuredContent.(map[string]any)["session_id"].(string)
	}
	type sessionOut struct {
		Session struct {
			ExecutionCount int    `json:"execution_count"`
			State          string `json:"state"`
		} `json:"session"`
		Stdout string `json:"stdout"`
	}
	inSession := func(t *testing.T, sid, code string) (sessionOut, *mcp.CallToolResult) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": code, "session_id": sid}})
		if err != nil {
			t.Fatal(err)
		}
		var out sessionOut
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &out)
		return out, res
	}

	t.Run("busy, tail, result, state", func(t *testing.T) {
		sid := create(t)
		if out, res := inSession(t, sid, "data = list(range(1000))\nprint(sum(data))"); res.IsError || out.Stdout != "499500\n" {
			t.Fatalf("loading the data: %+v %v", out, res.Content)
		}
		t0 := time.Now()
		id := bgStart(t, cs, map[string]any{"session_id": sid, "timeout_s": 60,
			"code": "import time\nfor i in range(10):\n    data.append(i)\n    print('tick', i, len(data), flush=True)\n    time.sleep(1)\nprint('sum', sum(data))"})
		if _, res := inSession(t, sid, "print(len(data))"); !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "session busy") {
			t.Errorf("a call while the run goes on: %v, want session busy", res.Content)
		}
		var tails []string
		for len(tails) < 3 {
			r, res := bgCall(t, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 1})
			if res.IsError || r.Status != "running" {
				t.Fatalf("run_wait while running: %+v %v", r, res.Content)
			}
			if r.StdoutTail != "" && (len(tails) == 0 || r.StdoutTail != tails[len(tails)-1]) {
				tails = append(tails, r.StdoutTail)
			}
		}
		if !strings.HasPrefix(tails[0], "tick 0 1001\n") || !strings.HasPrefix(tails[2], tails[1]) || len(tails[2]) <= len(tails[1]) {
			t.Errorf("stdout tails %q, want a growing tail from tick 0 on the session's data", tails)
		}
		r, res := bgWait(t, cs, id, 60*time.Second)
		t.Logf("the run ended %s after it started", time.Since(t0).Round(time.Millisecond))
		var out sessionOut
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &out)
		if res.IsError || !strings.HasSuffix(r.Stdout, "tick 9 1010\nsum 499545\n") || out.Session.ExecutionCount != 2 || out.Session.State != "kept" {
			t.Fatalf("the run's result: %+v %+v %v", r, out, res.Content)
		}
		if d := time.Since(t0); d < 9*time.Second {
			t.Fatalf("the run took %s, want about 10 s (past the 3 s idle timeout)", d)
		}
		if out, res := inSession(t, sid, "print(len(data), sum(data))"); res.IsError || out.Stdout != "1010 499545\n" || out.Session.ExecutionCount != 3 {
			t.Errorf("the call after the run: %+v %v, want the data the run left", out, res.Content)
		}
		cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "session_close", Arguments: map[string]any{"session_id": sid}})
	})

	t.Run("session_close stops the run", func(t *testing.T) {
		sid := create(t)
		id := bgStart(t, cs, map[string]any{"session_id": sid, "timeout_s": 300, "code": "import time\nprint('started', flush=True)\ntime.sleep(120)"})
		for {
			r, res := bgCall(t, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 1})
			if res.IsError || r.Status != "running" {
				t.Fatalf("run_wait: %+v %v", r, res.Content)
			}
			if r.StdoutTail == "started\n" {
				break
			}
		}
		t0 := time.Now()
		if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "session_close", Arguments: map[string]any{"session_id": sid}}); err != nil || res.IsError || res.StructuredContent.(map[string]any)["closed"] != true {
			t.Fatalf("session_close: %v %v", err, res)
		}
		_, res := bgCall(t, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 30})
		if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "session closed") {
			t.Errorf("run_wait after session_close: %s", res.Content[0].(*mcp.TextContent).Text)
		}
		t.Logf("the run ended %s after session_close", time.Since(t0).Round(time.Millisecond))
		for {
			n, err := e2e.Containers(instance)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Since(t0) > 30*time.Second {
				t.Fatalf("%d containers 30 s after session_close, want 0", n)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	srv.Stop(t) // no container left (Stop checks)
	if logs := srv.Logs.String(); strings.Contains(logs, "499545") || strings.Contains(logs, "tick") {
		t.Error("the server's log holds the program's output")
	}
}
