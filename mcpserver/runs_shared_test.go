package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// sharedFake is a RunStore and its RunSandboxes in one, shared by the servers of a test
// as a namespace's pods are by replicas. Its runs end when the test says so.
type sharedFake struct {
	mu   sync.Mutex
	runs map[string]*fakeRun // by handle
}

type fakeRun struct {
	owner   string
	rec     backend.RunRecord
	job     launcher.Job
	done    bool
	res     launcher.Result
	expired bool
	lost    bool
}

func newSharedFake() *sharedFake { return &sharedFake{runs: map[string]*fakeRun{}} }

func (f *sharedFake) Create(handle, owner string, timeout time.Duration) (map[string]string, map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[handle] = &fakeRun{owner: owner, rec: backend.RunRecord{Sandbox: "sb-" + handle, Started: time.Now(), Timeout: timeout}}
	return map[string]string{"handle": handle}, map[string]string{}
}

func (f *sharedFake) run(handle, owner string) (*fakeRun, error) {
	r, ok := f.runs[handle]
	switch {
	case !ok || r.owner != owner:
		return nil, backend.ErrRunNotFound
	case r.expired:
		return nil, backend.ErrRunExpired
	case r.lost:
		return nil, backend.ErrRunLost
	}
	return r, nil
}

func (f *sharedFake) Get(_ context.Context, handle, owner string) (backend.RunRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.run(handle, owner)
	if err != nil {
		return backend.RunRecord{}, err
	}
	return r.rec, nil
}

func (f *sharedFake) Ended(_ context.Context, rec backend.RunRecord, canceled bool) (backend.RunRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[strings.TrimPrefix(rec.Sandbox, "sb-")]
	if r.rec.Ended.IsZero() {
		r.rec.Ended = time.Now()
	}
	r.rec.Canceled = r.rec.Canceled || canceled
	return r.rec, nil
}

func (f *sharedFake) Forget(_ context.Context, handle, owner string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.run(handle, owner); err != nil {
		return err
	}
	delete(f.runs, handle)
	return nil
}

func (f *sharedFake) Count(_ context.Context, owner string) (all, owned int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.runs {
		all++
		if r.owner == owner {
			owned++
		}
	}
	return all, owned, nil
}

func (f *sharedFake) Keep(_ context.Context, so launcher.SessionOptions, job launcher.Job) error {
	if job.Tools != nil || job.Egress != "" {
		return launcher.ErrKeptTools
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[so.Labels["handle"]].job = job
	return nil
}

func (f *sharedFake) Fetch(_ context.Context, id string) (launcher.Result, launcher.Progress, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[strings.TrimPrefix(id, "sb-")]
	if !r.done {
		return launcher.Result{}, launcher.Progress{OutputBytes: 12, StdoutTail: "step 1\n", StderrTail: "warn\n"}, false, nil
	}
	return r.res, launcher.Progress{}, true, nil
}

func (f *sharedFake) Kill(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[strings.TrimPrefix(id, "sb-")]
	r.done, r.res = true, launcher.Result{ExitCode: 137, Signal: 9}
	return nil
}

func (f *sharedFake) end(handle string, res launcher.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[handle].done, f.runs[handle].res = true, res
}

func (f *sharedFake) expire(handle string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[handle].expired = true
}

func sharedRunOpts(f *sharedFake) RunOptions {
	return RunOptions{Max: 4, TTL: time.Hour, Store: f, Sandboxes: f}
}

// TestSharedRunAcrossServers: with the runs in a shared store, a run started on server A
// is answered by server B, whose memory never held it: its tails while it runs, then
// exactly what the same call in the foreground returns, plus run_id and status; another
// identity's handle is "not found" there; a cancel on B is seen on A as cancelled; the
// store's expiry is "expired", naming the setting. The runner is never called: the run
// is the store's.
func TestSharedRunAcrossServers(t *testing.T) {
	res := launcher.Result{Stdout: "done\n", Stderr: "warn\n", ExitCode: 3, Duration: 1500 * time.Millisecond,
		Files: []launcher.OutputFile{{Name: "a.txt", Size: 2, Data: []byte("hi")}}}
	f := newSharedFake()
	never := newSlowRunner(launcher.Result{})
	clientA := authClients(t, New(never, Options{Runs: sharedRunOpts(f)}))
	clientB := authClients(t, New(never, Options{Runs: sharedRunOpts(f)}))
	a, b, bobB := clientA("alice"), clientB("alice"), clientB("bob")

	id := startRun(t, a, map[string]any{"code": "print(1)", "timeout_s": 20})
	f.mu.Lock()
	got := f.runs[id].job
	f.mu.Unlock()
	if got.Code != "print(1)" || got.Timeout != 20*time.Second {
		t.Fatalf("the store's sandbox got %+v", got)
	}
	w := runWait(t, b, id, 0)
	m, _ := w.StructuredContent.(map[string]any)
	if w.IsError || m["status"] != "running" || m["stdout_tail"] != "step 1\n" || m["stderr_tail"] != "warn\n" {
		t.Fatalf("run_wait on B while it runs: %v %v", m, w.Content)
	}
	unknown := errText(t, runWait(t, bobB, "run_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0))
	for _, tool := range []string{toolRunWait, toolRunCancel} {
		if got := errText(t, callNamed(t, bobB, tool, map[string]any{"run_id": id})); got != unknown || !strings.Contains(got, "not found") {
			t.Errorf("bob's %s on B: %q, want %q", tool, got, unknown)
		}
	}

	f.end(id, res)
	fg := callNamed(t, clientOf(t, New(&fakeRunner{res: res}, Options{})), toolName, map[string]any{"code": "print(1)", "timeout_s": 20})
	var want map[string]any
	raw, _ := json.Marshal(fg.StructuredContent)
	json.Unmarshal(raw, &want)
	want["run_id"], want["status"] = id, "completed"
	for _, c := range []struct {
		name string
		w    func() map[string]any
	}{{"B", func() map[string]any { return structuredMap(t, runWait(t, b, id, 1)) }}, {"A", func() map[string]any { return structuredMap(t, runWait(t, a, id, 0)) }}} {
		if diff := cmp.Diff(want, c.w()); diff != "" {
			t.Errorf("run_wait on %s differs from the foreground exec (-want +got):\n%s", c.name, diff)
		}
	}
	if rec, _ := f.Get(t.Context(), id, "oauth https://issuer alice"); rec.Ended.IsZero() {
		t.Errorf("the run's end was not recorded in the store")
	}
	never.mu.Lock()
	n := len(never.ctxs)
	never.mu.Unlock()
	if n != 0 {
		t.Errorf("the server's runner ran %d calls, want none", n)
	}

	id2 := startRun(t, a, map[string]any{"code": "import time; time.sleep(60)"})
	if out := structuredMap(t, callNamed(t, b, toolRunCancel, map[string]any{"run_id": id2})); out["canceled"] != true {
		t.Fatalf("run_cancel on B: %v", out)
	}
	if got := errText(t, runWait(t, a, id2, 0)); !strings.Contains(got, "cancelled") {
		t.Errorf("run_wait on A after B's cancel: %q", got)
	}
	if out := structuredMap(t, callNamed(t, a, toolRunCancel, map[string]any{"run_id": id2})); out["canceled"] != false {
		t.Errorf("cancelling again: %v", out)
	}

	f.expire(id)
	if got := errText(t, runWait(t, b, id, 0)); !strings.Contains(got, "expired") || !strings.Contains(got, "run-ttl-s") {
		t.Errorf("run_wait after the store's expiry: %q", got)
	}

	// A run whose sandbox ended under it (an eviction) says it was lost.
	id3 := startRun(t, a, map[string]any{"code": "x"})
	f.mu.Lock()
	f.runs[id3].lost = true
	f.mu.Unlock()
	if got := errText(t, runWait(t, b, id3, 0)); !strings.Contains(got, "lost") {
		t.Errorf("run_wait of a lost run: %q", got)
	}
}

// TestSharedRunRefusals: the bounds count the store's runs (every server's).
func TestSharedRunRefusals(t *testing.T) {
	f := newSharedFake()
	o := sharedRunOpts(f)
	o.Max = 2
	a := clientOf(t, New(newSlowRunner(launcher.Result{}), Options{Runs: o}))
	b := clientOf(t, New(newSlowRunner(launcher.Result{}), Options{Runs: o}))
	startRun(t, a, map[string]any{"code": "x"})
	startRun(t, b, map[string]any{"code": "x"})
	if got := errText(t, callNamed(t, a, toolName, map[string]any{"code": "x", "background": true})); !strings.Contains(got, "max-background-runs") {
		t.Errorf("a third run over both servers: %q, want the bound named", got)
	}
}

func structuredMap(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("got a tool error: %s", text(t, res))
	}
	var m map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &m)
	return m
}

// TestSharedTasksAcrossServers: a 2025-11-25 task started on server A is answered on
// server B: tasks/get (working, then completed), a blocking tasks/result with exec's
// result and the related-task _meta; a second task is cancelled on B and is cancelled on
// A. Tasks share the shared runs.
func TestSharedTasksAcrossServers(t *testing.T) {
	f := newSharedFake()
	never := newSlowRunner(launcher.Result{})
	a, _ := rawConnect(t, New(never, Options{Runs: sharedRunOpts(f)}), true)
	b, _ := rawConnect(t, New(never, Options{Runs: sharedRunOpts(f)}), true)
	id := a.must("tools/call", execTask(map[string]any{"code": "print(1)"}))["task"].(map[string]any)["taskId"].(string)
	if g := b.must("tasks/get", map[string]any{"taskId": id}); g["status"] != "working" || g["taskId"] != id {
		t.Errorf("tasks/get on B while running: %v", g)
	}
	go func() { time.Sleep(700 * time.Millisecond); f.end(id, launcher.Result{Stdout: "done\n"}) }()
	res := b.must("tasks/result", map[string]any{"taskId": id})
	sc, _ := res["structuredContent"].(map[string]any)
	rel, _ := res["_meta"].(map[string]any)[metaRelated].(map[string]any)
	if sc["stdout"] != "done\n" || res["isError"] == true || rel["taskId"] != id {
		t.Errorf("tasks/result on B: %v", res)
	}
	if g := a.must("tasks/get", map[string]any{"taskId": id}); g["status"] != "completed" {
		t.Errorf("tasks/get on A after the end: %v", g)
	}
	id2 := a.must("tools/call", execTask(map[string]any{"code": "x"}))["task"].(map[string]any)["taskId"].(string)
	if c := b.must("tasks/cancel", map[string]any{"taskId": id2}); c["status"] != "cancelled" {
		t.Errorf("tasks/cancel on B: %v", c)
	}
	if g := a.must("tasks/get", map[string]any{"taskId": id2}); g["status"] != "cancelled" {
		t.Errorf("tasks/get on A after B's cancel: %v", g)
	}
}
