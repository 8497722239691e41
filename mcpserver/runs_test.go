package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// slowRunner reports progress once, then runs until release is closed or its context
// ends; ctxs are the contexts it was given, to see whether a run was cancelled.
type slowRunner struct {
	release chan struct{}
	res     launcher.Result
	mu      sync.Mutex
	ctxs    []context.Context
	started chan struct{} // one value per Run, after its progress report
}

func newSlowRunner(res launcher.Result) *slowRunner {
	return &slowRunner{release: make(chan struct{}), res: res, started: make(chan struct{}, 16)}
}

func (s *slowRunner) Options() launcher.Options { return launcher.Options{} }

func (s *slowRunner) Run(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	s.mu.Lock()
	s.ctxs = append(s.ctxs, ctx)
	s.mu.Unlock()
	if job.Progress != nil {
		job.Progress(launcher.Progress{Elapsed: time.Second, OutputBytes: 12, Tail: "warn\nstep 1\n", StdoutTail: "step 1\n", StderrTail: "warn\n"})
	}
	s.started <- struct{}{}
	select {
	case <-s.release:
		return s.res, nil
	case <-ctx.Done():
		return launcher.Result{}, ctx.Err()
	}
}

func (s *slowRunner) ctx(i int) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctxs[i]
}

// clientOf connects a new in-memory client to srv, closed when the test ends.
func clientOf(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func runOpts(max int) RunOptions { return RunOptions{Max: max, TTL: time.Hour} }

// startRun calls exec in the background and returns its run_id.
func startRun(t *testing.T, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	args["background"] = true
	res := callNamed(t, cs, toolName, args)
	if res.IsError {
		t.Fatalf("exec background: %s", text(t, res))
	}
	m := res.StructuredContent.(map[string]any)
	id, _ := m["run_id"].(string)
	if !strings.HasPrefix(id, "run_") || len(id) < 4+22 || m["status"] != "running" || m["expires_at"] == nil {
		t.Fatalf("exec background answered %v", m)
	}
	if !strings.Contains(text(t, res), id) {
		t.Errorf("the text does not carry the run_id: %q", text(t, res))
	}
	return id
}

func runWait(t *testing.T, cs *mcp.ClientSession, id string, timeoutS int) *mcp.CallToolResult {
	t.Helper()
	return callNamed(t, cs, toolRunWait, map[string]any{"run_id": id, "timeout_s": timeoutS})
}

func errText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		t.Fatalf("got a result, want a tool error: %v", res.StructuredContent)
	}
	return text(t, res)
}

// TestBackgroundRun: exec with background answers at once; run_wait shows the run's
// stdout and stderr tails while it runs, and once it has ended exactly what the same
// call in the foreground returns (structured content field by field, text, files as
// content), plus run_id and status; any number of times. The run is not cancelled when
// the client that started it goes away: a new client fetches the result.
func TestBackgroundRun(t *testing.T) {
	res := launcher.Result{Stdout: "done\n", Stderr: "warn\n", ExitCode: 3, Duration: 1500 * time.Millisecond,
		Files: []launcher.OutputFile{{Name: "a.txt", Size: 2, Data: []byte("hi")}, {Name: "p.png", Size: 8, Data: []byte("\x89PNG\r\n\x1a\n")}}}
	r := newSlowRunner(res)
	srv := New(r, Options{Runs: runOpts(4)})
	first := clientOf(t, srv)
	args := map[string]any{"code": "print(1)", "timeout_s": 20}
	id := startRun(t, first, args)
	<-r.started
	first.Close() // the client goes away mid-run

	cs := clientOf(t, srv)
	w := runWait(t, cs, id, 0)
	if w.IsError {
		t.Fatalf("run_wait: %s", text(t, w))
	}
	m := w.StructuredContent.(map[string]any)
	if m["status"] != "running" || m["run_id"] != id || m["stdout_tail"] != "step 1\n" || m["stderr_tail"] != "warn\n" || m["elapsed_ms"] == nil {
		t.Fatalf("run_wait while running: %v", m)
	}
	if err := r.ctx(0).Err(); err != nil {
		t.Fatalf("the run's context ended when its client went away: %v", err)
	}
	close(r.release)

	// The same call in the foreground, for comparison.
	fg := callNamed(t, cs, toolName, map[string]any{"code": "print(1)", "timeout_s": 20})
	<-r.started
	var want map[string]any
	raw, _ := json.Marshal(fg.StructuredContent)
	json.Unmarshal(raw, &want)
	want["run_id"], want["status"] = id, "completed"
	for i := range 20 { // kept: handed out again, also to a run_wait that does not wait
		w = runWait(t, cs, id, min(i, 1))
		if w.IsError {
			t.Fatalf("run_wait: %s", text(t, w))
		}
		raw, _ := json.Marshal(w.StructuredContent)
		var got map[string]any
		json.Unmarshal(raw, &got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("completed run_wait's structured content differs from the foreground exec's (-want +got):\n%s", diff)
		}
		if len(w.Content) != len(fg.Content) || len(w.Content) != 3 {
			t.Fatalf("content: %d blocks, foreground %d, want 3", len(w.Content), len(fg.Content))
		}
		wt, ft := w.Content[0].(*mcp.TextContent).Text, fg.Content[0].(*mcp.TextContent).Text
		if wt != "run_id: "+id+"\nstatus: completed\n"+ft {
			t.Errorf("text: got %q, want the foreground's %q after run_id and status", wt, ft)
		}
		for i := 1; i < 3; i++ {
			a, _ := json.Marshal(w.Content[i])
			b, _ := json.Marshal(fg.Content[i])
			if !bytes.Equal(a, b) {
				t.Errorf("content[%d]: got %s, want %s", i, a, b)
			}
		}
	}
}

// TestRunCancel: run_cancel stops a running run (its context ends), says so once, and
// is idempotent; run_wait then says it was cancelled. A foreground exec is still
// cancelled with its request.
func TestRunCancel(t *testing.T) {
	r := newSlowRunner(launcher.Result{})
	cs := clientOf(t, New(r, Options{Runs: runOpts(4)}))
	id := startRun(t, cs, map[string]any{"code": "x"})
	<-r.started
	for i, want := range []bool{true, false} {
		res := callNamed(t, cs, toolRunCancel, map[string]any{"run_id": id})
		if res.IsError || res.StructuredContent.(map[string]any)["canceled"] != want {
			t.Fatalf("run_cancel #%d: %v %s, want canceled %v", i, res.StructuredContent, text(t, res), want)
		}
	}
	if r.ctx(0).Err() == nil {
		t.Fatal("the run's context is still live after run_cancel")
	}
	if got := errText(t, runWait(t, cs, id, 1)); !strings.Contains(got, "cancelled") {
		t.Errorf("run_wait after cancel: %q", got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"code": "x"}})
		done <- err
	}()
	<-r.started
	cancel()
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for r.ctx(1).Err() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r.ctx(1).Err() == nil {
		t.Error("a foreground exec's run outlived its cancelled request")
	}
}

// fakeClock is a registry clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock() *fakeClock               { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (c *fakeClock) opts(max int) RunOptions {
	return RunOptions{Max: max, TTL: time.Minute, Now: c.now}
}

// TestRunTTL: a result is kept TTL after its run ends, then removed: run_wait says
// "expired", naming the TTL and its flag; a handle never seen is "not found".
func TestRunTTL(t *testing.T) {
	r := newSlowRunner(launcher.Result{Stdout: "ok"})
	close(r.release)
	clock := newClock()
	cs := clientOf(t, New(r, Options{Runs: clock.opts(4), Vars: testVars}))
	id := startRun(t, cs, map[string]any{"code": "x"})
	if w := runWait(t, cs, id, 5); w.IsError {
		t.Fatal(text(t, w))
	}
	clock.add(59 * time.Second)
	if w := runWait(t, cs, id, 5); w.IsError {
		t.Fatalf("before the TTL: %s", text(t, w))
	}
	clock.add(time.Second)
	got := errText(t, runWait(t, cs, id, 5))
	if !strings.Contains(got, "expired") || !strings.Contains(got, "1m0s") || !strings.Contains(got, "--run-ttl-s") || !strings.Contains(got, "MCP_EXEC_RUN_TTL_S") {
		t.Errorf("after the TTL: %q, want expired naming the TTL and its setting", got)
	}
	if got := errText(t, runWait(t, cs, "run_nosuchrun", 1)); !strings.Contains(got, "not found") {
		t.Errorf("unknown handle: %q", got)
	}
}

// TestRunOtherIdentity: another identity's handle is "not found", the same text as a
// handle never seen, for run_wait and run_cancel alike; the owner's run goes on.
func TestRunOtherIdentity(t *testing.T) {
	r := newSlowRunner(launcher.Result{})
	client := authClients(t, New(r, Options{Runs: runOpts(4)}))
	alice, bob := client("alice"), client("bob")
	id := startRun(t, alice, map[string]any{"code": "x"})
	<-r.started
	unknown := errText(t, runWait(t, bob, "run_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0))
	for _, tool := range []string{toolRunWait, toolRunCancel} {
		got := errText(t, callNamed(t, bob, tool, map[string]any{"run_id": id}))
		if got != unknown || !strings.Contains(got, "not found") {
			t.Errorf("bob's %s of alice's run: %q, want %q", tool, got, unknown)
		}
	}
	if r.ctx(0).Err() != nil {
		t.Fatal("bob's run_cancel ended alice's run")
	}
	if w := runWait(t, alice, id, 0); w.IsError || w.StructuredContent.(map[string]any)["status"] != "running" {
		t.Fatalf("alice's run_wait: %v", w.Content)
	}
	close(r.release)
}

// TestRunLimits: the bounds count runs running and results kept: with Max 2, a third
// run is refused even after the first two have ended, naming the setting, until their
// results expire, which is what bounds the memory results take (Max times one
// result's caps). MaxPerIdentity bounds one identity's alone.
func TestRunLimits(t *testing.T) {
	r := newSlowRunner(launcher.Result{Stdout: "ok"})
	close(r.release)
	clock := newClock()
	cs := clientOf(t, New(r, Options{Runs: clock.opts(2), Vars: testVars}))
	for range 2 {
		id := startRun(t, cs, map[string]any{"code": "x"})
		if w := runWait(t, cs, id, 5); w.IsError {
			t.Fatal(text(t, w))
		}
	}
	got := errText(t, callNamed(t, cs, toolName, map[string]any{"code": "x", "background": true}))
	if !strings.Contains(got, "at most 2") || !strings.Contains(got, "--max-background-runs,") || !strings.Contains(got, "MCP_EXEC_MAX_BACKGROUND_RUNS)") {
		t.Errorf("third run: %q, want refused naming the limit", got)
	}
	clock.add(time.Minute)
	startRun(t, cs, map[string]any{"code": "x"})

	o := newClock().opts(3)
	o.MaxPerIdentity = 1
	client := authClients(t, New(r, Options{Runs: o, Vars: testVars}))
	alice, bob := client("alice"), client("bob")
	startRun(t, alice, map[string]any{"code": "x"})
	got = errText(t, callNamed(t, alice, toolName, map[string]any{"code": "x", "background": true}))
	if !strings.Contains(got, "at most 1") || !strings.Contains(got, "--max-background-runs-per-identity") {
		t.Errorf("alice's second run: %q", got)
	}
	startRun(t, bob, map[string]any{"code": "x"})
}

// TestRunRefusals: run_wait's timeout_s is bounded, naming the bound; background is
// refused with a session_id where there are no sessions, and with invalid arguments
// before anything runs; without
// Runs there is no background argument and no run tools.
func TestRunRefusals(t *testing.T) {
	r := newSlowRunner(launcher.Result{})
	cs := clientOf(t, New(r, Options{Runs: runOpts(4)}))
	if got := errText(t, runWait(t, cs, "run_x", 61)); !strings.Contains(got, "from 0 to 60") {
		t.Errorf("timeout_s 61: %q", got)
	}
	if got := errText(t, callNamed(t, cs, toolName, map[string]any{"code": "x", "background": true, "session_id": "s"})); !strings.Contains(got, "session_id") {
		t.Errorf("with session_id: %q", got)
	}
	if got := errText(t, callNamed(t, cs, toolName, map[string]any{"code": " ", "background": true})); !strings.Contains(got, "code is empty") {
		t.Errorf("empty code: %q", got)
	}
	if len(r.ctxs) != 0 {
		t.Errorf("the runner ran %d refused calls", len(r.ctxs))
	}
	plain := clientOf(t, New(r, Options{}))
	tools, err := plain.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].InputSchema.(map[string]any)["properties"].(map[string]any)["background"] != nil {
		t.Errorf("without Runs: %d tools, exec's schema %v", len(tools.Tools), tools.Tools[0].InputSchema)
	}
}

// TestRunHandleNotLogged: the log says a run's hash, never its handle.
func TestRunHandleNotLogged(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	w := zerolog.SyncWriter(&lockedWriter{&logs, &mu})
	r := newSlowRunner(launcher.Result{})
	cs := clientOf(t, New(r, Options{Runs: runOpts(4), Logger: zerolog.New(w)}))
	id := startRun(t, cs, map[string]any{"code": "x"})
	<-r.started
	runWait(t, cs, id, 0)
	callNamed(t, cs, toolRunCancel, map[string]any{"run_id": id})
	runWait(t, cs, id, 0)
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), id) || strings.Contains(logs.String(), id[4:20]) {
		t.Fatalf("the log holds the run's handle:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), handleHash(id)) {
		t.Errorf("the log does not name the run by its hash:\n%s", logs.String())
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestBackgroundCodeMode: in code mode a background run's job carries the exec's tools,
// and its result tool_calls, as a foreground call's.
func TestBackgroundCodeMode(t *testing.T) {
	cfg, err := upstream.Parse([]byte(`{"mcpServers": {"echo-server": {"command": "/bin/false", "tools": ["echo"]}}}`),
		upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRunner{res: launcher.Result{Stdout: "ok\n"}}
	cs := clientOf(t, New(r, Options{Upstreams: upstream.New(cfg, "test", zerolog.Nop()), Runs: runOpts(2)}))
	id := startRun(t, cs, map[string]any{"code": "print(1)"})
	w := runWait(t, cs, id, 5)
	if w.IsError {
		t.Fatal(text(t, w))
	}
	m := w.StructuredContent.(map[string]any)
	if m["stdout"] != "ok\n" || m["status"] != "completed" || m["tool_calls"] == nil || m["tool_calls_more"] == nil {
		t.Errorf("code mode's run_wait: %v", m)
	}
	if jobs := r.calls(); len(jobs) != 1 || jobs[0].Tools == nil {
		t.Fatalf("runner got %+v, want one job with the exec's tools", jobs)
	}
}

// TestRunDescriptions: exec's description and run_wait's state the TTL and the bound.
func TestRunDescriptions(t *testing.T) {
	cs := clientOf(t, New(&fakeRunner{}, Options{Runs: RunOptions{Max: 3, MaxPerIdentity: 2, TTL: 5 * time.Minute}}))
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		switch tl.Name {
		case toolName:
			if !strings.Contains(tl.Description, "kept 5m0s after the run ends. At most 3 runs") {
				t.Errorf("exec's description: %s", tl.Description)
			}
		case toolRunWait:
			if !strings.Contains(tl.Description, "kept 5m0s after its run ends") || !strings.Contains(tl.Description, "At most 3 runs at once on this server, running or with a result kept, at most 2 of them yours") {
				t.Errorf("run_wait's description: %s", tl.Description)
			}
		}
	}
}

// TestRunWaitProgress: a run_wait whose request carries a progress token gets
// notifications while it waits, quoting the run's last output line, none after its
// answer.
func TestRunWaitProgress(t *testing.T) {
	r := newSlowRunner(launcher.Result{})
	srv := New(r, Options{Runs: runOpts(2)})
	var mu sync.Mutex
	var msgs []string
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			msgs = append(msgs, req.Params.Message)
			mu.Unlock()
		},
	}).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	id := startRun(t, cs, map[string]any{"code": "x"})
	<-r.started
	p := &mcp.CallToolParams{Name: toolRunWait, Arguments: map[string]any{"run_id": id, "timeout_s": 3}}
	p.SetProgressToken("w1")
	res, err := cs.CallTool(t.Context(), p)
	if err != nil || res.IsError {
		t.Fatalf("run_wait: %v %v", err, res)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	n := len(msgs)
	if n < 2 || !strings.Contains(msgs[0], "last: step 1") {
		t.Errorf("progress while waiting 3 s: %q, want about 3 quoting the last line", msgs)
	}
	mu.Unlock()
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	if len(msgs) != n {
		t.Errorf("%d notifications after run_wait answered", len(msgs)-n)
	}
	mu.Unlock()
	close(r.release)
}
