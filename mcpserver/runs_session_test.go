package mcpserver

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// sessionOf is the session part of a result's structured content.
func sessionOf(t *testing.T, res *mcp.CallToolResult) sessionInfo {
	t.Helper()
	raw, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Session *sessionInfo `json:"session"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Session == nil {
		t.Fatalf("no session in %s (%v)", raw, err)
	}
	return *out.Session
}

func inSession(sid string) map[string]any { return map[string]any{"code": "x", "session_id": sid} }

// TestBackgroundInSession: exec with background and session_id answers with a run_id;
// the session is busy until the run ends (a call in it, in the foreground or the
// background, is refused as busy); run_wait shows the run, then its result with the
// session in it; the next call in the session runs on what the run left.
func TestBackgroundInSession(t *testing.T) {
	f := &fakeSessions{gate: make(chan struct{})}
	cs := clientOf(t, New(&fakeRunner{}, Options{Sessions: sessionOpts(f), Runs: runOpts(4)}))
	sid := createSession(t, cs).SessionID
	id := startRun(t, cs, inSession(sid))
	for _, bg := range []bool{false, true} {
		args := inSession(sid)
		args["background"] = bg
		if got := errText(t, callNamed(t, cs, toolName, args)); !strings.Contains(got, "session busy") {
			t.Errorf("a call (background %v) while the run goes on: %q, want busy", bg, got)
		}
	}
	if w := runWait(t, cs, id, 0); w.IsError || w.StructuredContent.(map[string]any)["status"] != "running" {
		t.Fatalf("run_wait while it runs: %v %s", w.StructuredContent, text(t, w))
	}
	close(f.gate)
	w := runWait(t, cs, id, 5)
	if w.IsError {
		t.Fatalf("run_wait: %s", text(t, w))
	}
	if s := sessionOf(t, w); s.ID != sid || s.ExecutionCount != 1 || s.State != launcher.SessionKept || w.StructuredContent.(map[string]any)["stdout"] != "x" {
		t.Errorf("the run's result: %v", w.StructuredContent)
	}
	if !strings.Contains(text(t, w), "session: "+sid) {
		t.Errorf("the run's text lacks the session line: %q", text(t, w))
	}
	res, out := sessionExecOut(t, cs, sid)
	if res.IsError || out.Stdout != "xx" || out.Session.ExecutionCount != 2 {
		t.Errorf("the call after the run: %s", text(t, res))
	}
}

// TestBackgroundInSessionClaimsAtOnce: the session is claimed before exec answers, so a
// background call in a busy session is refused at once (not a run whose result says
// busy), and a background call over the runs' bound claims nothing (the session's next
// call is its first).
func TestBackgroundInSessionClaimsAtOnce(t *testing.T) {
	f := &fakeSessions{gate: make(chan struct{})}
	cs := clientOf(t, New(&fakeRunner{}, Options{Sessions: sessionOpts(f), Runs: runOpts(1), Vars: testVars}))
	sid := createSession(t, cs).SessionID
	done := make(chan *mcp.CallToolResult)
	go func() { done <- callNamed(t, cs, toolName, inSession(sid)) }()
	time.Sleep(200 * time.Millisecond)
	args := inSession(sid)
	args["background"] = true
	if got := errText(t, callNamed(t, cs, toolName, args)); !strings.Contains(got, "session busy") {
		t.Errorf("background in a busy session: %q", got)
	}
	close(f.gate)
	if res := <-done; res.IsError {
		t.Fatalf("the foreground call: %s", text(t, res))
	}

	startRun(t, cs, map[string]any{"code": "x"}) // the one run the bound allows, kept
	if got := errText(t, callNamed(t, cs, toolName, args)); !strings.Contains(got, "--max-background-runs") {
		t.Errorf("background in a session over the bound: %q", got)
	}
	if res, out := sessionExecOut(t, cs, sid); res.IsError || out.Session.ExecutionCount != 2 {
		t.Errorf("the call after the refusals: %s, want execution_count 2", text(t, res))
	}
}

// TestBackgroundInSessionEnds: session_close during a background run stops it (run_wait
// says the session was closed); run_cancel stops it and leaves the session usable; the
// idle timeout does not end a session while its run goes on; the maximum lifetime ends
// the run and the session.
func TestBackgroundInSessionEnds(t *testing.T) {
	for name, f := range map[string]*fakeSessions{
		"close, the call fails":   {closeErr: errors.New("sandbox 0123 ended without a result")},
		"close, the call is lost": {closeLost: true},
	} {
		t.Run(name, func(t *testing.T) {
			// As the launcher's session may, the call fails or is lost as its sandbox goes.
			f.gate = make(chan struct{})
			cs := clientOf(t, New(&fakeRunner{}, Options{Sessions: sessionOpts(f), Runs: runOpts(4)}))
			sid := createSession(t, cs).SessionID
			id := startRun(t, cs, inSession(sid))
			if res := callNamed(t, cs, toolSessionClose, map[string]any{"session_id": sid}); res.IsError || res.StructuredContent.(map[string]any)["closed"] != true {
				t.Fatalf("session_close: %s", text(t, res))
			}
			if got := errText(t, runWait(t, cs, id, 5)); !strings.Contains(got, "session closed while the call ran (session_close)") {
				t.Errorf("run_wait after session_close: %q", got)
			}
			if !f.conns[0].isClosed() {
				t.Error("the session's sandbox is still open")
			}
		})
	}
	t.Run("cancel", func(t *testing.T) {
		f := &fakeSessions{gate: make(chan struct{})}
		cs := clientOf(t, New(&fakeRunner{}, Options{Sessions: sessionOpts(f), Runs: runOpts(4)}))
		sid := createSession(t, cs).SessionID
		id := startRun(t, cs, inSession(sid))
		if res := callNamed(t, cs, toolRunCancel, map[string]any{"run_id": id}); res.IsError || res.StructuredContent.(map[string]any)["canceled"] != true {
			t.Fatalf("run_cancel: %s", text(t, res))
		}
		if got := errText(t, runWait(t, cs, id, 1)); !strings.Contains(got, "cancelled") {
			t.Errorf("run_wait after run_cancel: %q", got)
		}
		close(f.gate)
		if res, out := sessionExecOut(t, cs, sid); res.IsError || out.Session.ExecutionCount != 2 {
			t.Errorf("the call after run_cancel: %s", text(t, res))
		}
	})
	t.Run("idle", func(t *testing.T) {
		f := &fakeSessions{gate: make(chan struct{})}
		o := sessionOpts(f)
		o.IdleTimeout = 300 * time.Millisecond
		cs := clientOf(t, New(&fakeRunner{}, Options{Sessions: o, Runs: runOpts(4)}))
		sid := createSession(t, cs).SessionID
		id := startRun(t, cs, inSession(sid))
		time.Sleep(1200 * time.Millisecond) // four idle timeouts
		close(f.gate)
		w := runWait(t, cs, id, 5)
		if w.IsError {
			t.Fatalf("run_wait after the idle timeout: %s", text(t, w))
		}
		if s := sessionOf(t, w); s.State != launcher.SessionKept {
			t.Errorf("the run's session: %+v", s)
		}
		if res, out := sessionExecOut(t, cs, sid); res.IsError || out.Session.ExecutionCount != 2 {
			t.Errorf("the call after the run: %s", text(t, res))
		}
		if f.conns[0].isClosed() {
			t.Error("the session's sandbox was closed")
		}
	})
	t.Run("lifetime", func(t *testing.T) {
		f := &fakeSessions{gate: make(chan struct{})}
		o := sessionOpts(f)
		o.MaxLifetime = 700 * time.Millisecond
		cs := clientOf(t, New(&fakeRunner{}, Options{Sessions: o, Runs: runOpts(4), Vars: testVars}))
		sid := createSession(t, cs).SessionID
		id := startRun(t, cs, inSession(sid))
		got := errText(t, runWait(t, cs, id, 5))
		if !strings.Contains(got, "maximum lifetime") || !strings.Contains(got, "--session-max-lifetime-s") {
			t.Errorf("run_wait of a run past its session's lifetime: %q", got)
		}
		if res, _ := sessionExecOut(t, cs, sid); !res.IsError || !strings.Contains(text(t, res), "expired: it reached its maximum lifetime") {
			t.Errorf("the session after its lifetime: %s", text(t, res))
		}
		deadline := time.Now().Add(5 * time.Second)
		for !f.conns[0].isClosed() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !f.conns[0].isClosed() {
			t.Error("the session's sandbox is still open")
		}
	})
}

// TestBackgroundInSharedSession: where every replica serves a session (Kubernetes) but a
// run lives on the replica that started it, background with session_id is refused,
// saying why; without session_id it is not.
func TestBackgroundInSharedSession(t *testing.T) {
	cs := clientOf(t, New(&fakeRunner{}, Options{Sessions: sharedOpts(newFakeStore()), Runs: runOpts(4)}))
	sid := createSession(t, cs).SessionID
	args := inSession(sid)
	args["background"] = true
	if got := errText(t, callNamed(t, cs, toolName, args)); !strings.Contains(got, "background cannot be used with session_id") || !strings.Contains(got, "kubernetes") {
		t.Errorf("background in a shared session: %q", got)
	}
	startRun(t, cs, map[string]any{"code": "x"})
}

// TestBackgroundInSessionCodeMode: in code mode a background run in a session gets the
// call's own tools and budget, and its result has tool_calls and the session.
func TestBackgroundInSessionCodeMode(t *testing.T) {
	cfg, err := upstream.Parse([]byte(`{"mcpServers": {"echo-server": {"command": "/bin/false", "tools": ["echo"]}}, "limits": {"max_calls": 2}}`),
		upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSessions{toolCalls: 3}
	cs := clientOf(t, New(&fakeRunner{}, Options{Upstreams: upstream.New(cfg, "test", zerolog.Nop()), Sessions: sessionOpts(f), Runs: runOpts(2)}))
	sid := createSession(t, cs).SessionID
	for i := range 2 {
		w := runWait(t, cs, startRun(t, cs, inSession(sid)), 5)
		if w.IsError {
			t.Fatal(text(t, w))
		}
		raw, _ := json.Marshal(w.StructuredContent)
		var out execToolsOutput
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		if out.Session == nil || out.Session.ExecutionCount != i+1 || len(out.ToolCalls) != 2 || len(out.ToolCallsMore) != 1 {
			t.Errorf("run %d: session %+v, tool_calls %+v, tool_calls_more %+v; want 2 counted, 1 past the budget", i+1, out.Session, out.ToolCalls, out.ToolCallsMore)
		}
	}
	if jobs := f.conns[0].jobs(); len(jobs) != 2 || jobs[0].Tools == nil || jobs[0].Tools == jobs[1].Tools {
		t.Fatalf("the session got %d jobs, want 2, each with tools of its own", len(jobs))
	}
}

// TestTaskInSession: an MCP task (2025-11-25) of exec with session_id runs in the
// session, and its result has the session.
func TestTaskInSession(t *testing.T) {
	f := &fakeSessions{}
	rc, _ := rawConnect(t, New(&fakeRunner{}, Options{Sessions: sessionOpts(f), Runs: runOpts(4)}), true)
	created := rc.must("tools/call", map[string]any{"name": toolSessionCreate, "arguments": map[string]any{}})
	sid, _ := created["structuredContent"].(map[string]any)["session_id"].(string)
	for i := 1; i <= 2; i++ {
		tk := rc.must("tools/call", execTask(inSession(sid)))["task"].(map[string]any)
		res := rc.must("tasks/result", map[string]any{"taskId": tk["taskId"]})
		sess, _ := res["structuredContent"].(map[string]any)["session"].(map[string]any)
		if res["isError"] == true || sess["id"] != sid || sess["execution_count"] != float64(i) {
			t.Errorf("task %d's result: %v", i, res)
		}
	}
}
