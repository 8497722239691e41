//go:build enginefault

// The engine-restart test stops and starts an engine in the middle of calls, so it
// runs only when asked for (go test -tags enginefault) and only against an engine of
// its own, never the one other tests share: MCP_EXEC_TEST_FAULT_HOST names it, and
// MCP_EXEC_TEST_FAULT_DOWN and MCP_EXEC_TEST_FAULT_UP are the shell commands that stop
// it and start it again (scripts/test.sh: a private dockerd from
// scripts/fault-engine.sh, and the rootful Podman service of scripts/podman.sh).

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// restartResult is the structured result of exec, field by field.
type restartResult struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated"`
	TimedOut  bool   `json:"timed_out"`
	OOMKilled bool   `json:"oom_killed"`
	Files     []struct {
		Name     string `json:"name"`
		Size     int64  `json:"size"`
		Returned bool   `json:"returned"`
	} `json:"files"`
}

// restartKind is one kind of program the clients run, with its check.
type restartKind struct {
	name     string
	args     map[string]any
	timeoutS int           // the call's own timeout (the engine-wait bound's second term)
	cancel   time.Duration // >0: the client cancels the call after this long
	check    func(r restartResult) error
}

func restartKinds() []restartKind {
	want := func(cond bool, format string, args ...any) error {
		if cond {
			return nil
		}
		return fmt.Errorf(format, args...)
	}
	return []restartKind{
		{name: "normal", timeoutS: 30, args: map[string]any{
			"code":  "import sys\nprint(sum(range(10)))\nprint(sys.stdin.read().upper())\nprint('e', file=sys.stderr)",
			"stdin": "abc",
		}, check: func(r restartResult) error {
			return want(r.Stdout == "45\nABC\n" && r.Stderr == "e\n" && r.ExitCode == 0 && !r.TimedOut && !r.Truncated && !r.OOMKilled,
				"got %+v, want stdout 45/ABC, stderr e, exit 0", r)
		}},
		{name: "exit", timeoutS: 30, args: map[string]any{"code": "import sys\nsys.exit(3)"},
			check: func(r restartResult) error {
				return want(r.ExitCode == 3 && !r.TimedOut, "got %+v, want exit 3", r)
			}},
		{name: "timeout", timeoutS: 2, args: map[string]any{
			"code": "import time\nprint('start', flush=True)\ntime.sleep(60)", "timeout_s": 2,
		}, check: func(r restartResult) error {
			return want(r.TimedOut && r.ExitCode == 137 && r.Stdout == "start\n", "got %+v, want timed out with stdout start", r)
		}},
		{name: "oom", timeoutS: 30, args: map[string]any{
			"code": "b = bytearray(1024 * 1024 * 1024)\nprint('survived')",
		}, check: func(r restartResult) error {
			return want(r.ExitCode == 137 && !r.TimedOut && !strings.Contains(r.Stdout, "survived"),
				"got exit %d timed out %v oom %v stdout %q, want killed (137)", r.ExitCode, r.TimedOut, r.OOMKilled, r.Stdout)
		}},
		{name: "flood", timeoutS: 3, args: map[string]any{
			"code": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", "timeout_s": 3,
		}, check: func(r restartResult) error {
			return want(r.Truncated && r.TimedOut && len(r.Stdout) > 0 && len(r.Stdout) <= 1<<20 && strings.Trim(r.Stdout, "x") == "",
				"got truncated %v timed out %v %d bytes of stdout, want a truncated flood", r.Truncated, r.TimedOut, len(r.Stdout))
		}},
		{name: "files", timeoutS: 30, args: map[string]any{
			"code":  "data = open('in/data.csv').read()\nprint(data.splitlines()[1])\nopen('/tmp/outputs/out.txt', 'w').write(data.upper())",
			"files": []map[string]any{{"name": "in/data.csv", "content": "a,b\n1,2\n"}},
		}, check: func(r restartResult) error {
			return want(r.Stdout == "1,2\n" && r.ExitCode == 0 && len(r.Files) == 1 && r.Files[0].Name == "out.txt" &&
				r.Files[0].Size == 8 && r.Files[0].Returned, "got %+v, want stdout 1,2 and out.txt (8 bytes) returned", r)
		}},
		{name: "cancel", timeoutS: 30, cancel: 1500 * time.Millisecond, args: map[string]any{
			"code": "import time\ntime.sleep(30)",
		}},
	}
}

// restartTally counts what the clients saw.
type restartTally struct {
	mu     sync.Mutex
	ok     map[string]int
	infra  map[string]int // infrastructure errors past the bound
	failed []string
}

func (c *restartTally) add(kind string, infra bool, failure string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case failure != "":
		c.failed = append(c.failed, kind+": "+failure)
	case infra:
		c.infra[kind]++
	default:
		c.ok[kind]++
	}
}

// restartCall makes one call of kind and checks it: right, or a clear infrastructure
// error only after the engine-wait bound.
func restartCall(ctx context.Context, s *mcp.ClientSession, k restartKind, engineWait time.Duration, tally *restartTally) {
	cctx := ctx
	if k.cancel > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, k.cancel)
		defer cancel()
	}
	t0 := time.Now()
	res, err := s.CallTool(cctx, &mcp.CallToolParams{Name: "exec", Arguments: k.args})
	took := time.Since(t0)
	if ctx.Err() != nil {
		return // the test is over
	}
	if k.cancel > 0 {
		if err == nil || cctx.Err() == nil {
			tally.add(k.name, false, fmt.Sprintf("cancelled call: err %v after %s, want the cancellation", err, took))
			return
		}
		tally.add(k.name, false, "")
		return
	}
	if err != nil {
		tally.add(k.name, false, fmt.Sprintf("protocol error after %s: %v", took, err))
		return
	}
	if res.IsError {
		text := toolText(res)
		bound := min(engineWait, time.Duration(k.timeoutS)*time.Second)
		if strings.Contains(text, "engine") && strings.Contains(text, "MCP_EXEC_ENGINE_WAIT_S") && took >= bound {
			tally.add(k.name, true, "")
			return
		}
		tally.add(k.name, false, fmt.Sprintf("tool error after %s (bound %s): %s", took.Round(time.Millisecond), bound, text))
		return
	}
	var r restartResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		tally.add(k.name, false, fmt.Sprintf("structured content %s: %v", b, err))
		return
	}
	if err := k.check(r); err != nil {
		tally.add(k.name, false, err.Error())
		return
	}
	tally.add(k.name, false, "")
}

func TestEngineRestartUnderLoad(t *testing.T) {
	host := os.Getenv("MCP_EXEC_TEST_FAULT_HOST")
	down, up := os.Getenv("MCP_EXEC_TEST_FAULT_DOWN"), os.Getenv("MCP_EXEC_TEST_FAULT_UP")
	if host == "" || down == "" || up == "" {
		t.Fatal("MCP_EXEC_TEST_FAULT_HOST, MCP_EXEC_TEST_FAULT_DOWN and MCP_EXEC_TEST_FAULT_UP must name an engine of this test's own and how to stop and start it (scripts/test.sh sets them)")
	}
	// e2e.AssertNoContainers (at each server's stop) looks at this engine.
	t.Setenv("DOCKER_HOST", host)
	ctl := func(what, cmd string) time.Duration {
		t.Helper()
		t0 := time.Now()
		if out, err := exec.Command("bash", "-c", cmd).CombinedOutput(); err != nil {
			t.Fatalf("%s (%s): %v\n%s", what, cmd, err, out)
		}
		return time.Since(t0)
	}
	t.Cleanup(func() { _ = exec.Command("bash", "-c", up).Run() })

	bin := e2e.Build(t)
	const engineWait = 60 * time.Second
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DOCKER_HOST=" + host,
		"MCP_EXEC_POOL_SIZE=2", "MCP_EXEC_ENGINE_WAIT_S=60"}
	if v := os.Getenv("MCP_EXEC_IMAGE"); v != "" {
		env = append(env, "MCP_EXEC_IMAGE="+v)
	}
	suffix := fmt.Sprint(os.Getpid())
	srv, err := e2e.StartServer(t, bin, env, "http", "test-restart-"+suffix, "")
	if err != nil {
		t.Fatal(err)
	}
	// A second server, cold, that waits only 3 s: the engine stays away longer.
	const shortWait = 3 * time.Second
	short, err := e2e.StartServer(t, bin, append(append([]string{}, env...), "MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_ENGINE_WAIT_S=3"),
		"http", "test-restart-short-"+suffix, "")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	ready := func() int {
		resp, err := hc.Get(srv.Base + "/readyz")
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(60 * time.Second); ready() != 200; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not ready within 60 s")
		}
	}

	var sessions []*mcp.ClientSession
	connect := func(s *e2e.Server) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "restart-test", Version: "0"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.Endpoint}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
		return cs
	}
	tally := &restartTally{ok: map[string]int{}, infra: map[string]int{}}
	kinds := restartKinds()
	ctx, stop := context.WithCancel(t.Context())
	var clients sync.WaitGroup
	for c := range 4 {
		cs := connect(srv)
		clients.Add(1)
		go func() {
			defer clients.Done()
			// Calls are never abandoned: the clients stop between calls.
			for i := c; ctx.Err() == nil; i++ {
				restartCall(t.Context(), cs, kinds[i%len(kinds)], engineWait, tally)
			}
		}()
	}
	// /readyz, sampled throughout.
	var saw503, ready200After atomic.Bool
	var restarted atomic.Bool
	go func() {
		for ctx.Err() == nil {
			switch code := ready(); {
			case code == 503 && !restarted.Load():
				saw503.Store(true)
			case code == 200 && restarted.Load():
				ready200After.Store(true)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	time.Sleep(10 * time.Second)
	// The short-wait server's call is made while the engine is away and stays away
	// past its bound.
	shortSession := connect(short)
	shortDone := make(chan string, 1)
	downAt := time.Now()
	go func() {
		time.Sleep(time.Second) // the engine's API is gone within 0.25 s of SIGTERM
		t0 := time.Now()
		res, err := shortSession.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "print(1)"}})
		took := time.Since(t0)
		switch {
		case err != nil:
			shortDone <- fmt.Sprintf("protocol error %v", err)
		case !res.IsError || !strings.Contains(toolText(res), "MCP_EXEC_ENGINE_WAIT_S"):
			shortDone <- fmt.Sprintf("after %s: isError %v %q, want the engine error naming MCP_EXEC_ENGINE_WAIT_S", took, res.IsError, toolText(res))
		case took < shortWait:
			shortDone <- fmt.Sprintf("failed after %s, before its bound of %s", took, shortWait)
		default:
			shortDone <- ""
		}
	}()
	t.Logf("stopping the engine")
	d := ctl("stopping the engine", down)
	t.Logf("engine stopped in %s; starting it again in 3 s", d.Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	d = ctl("starting the engine", up)
	restarted.Store(true)
	upAt := time.Now()
	t.Logf("engine answering again %s after the stop began (start took %s)", upAt.Sub(downAt).Round(time.Millisecond), d.Round(time.Millisecond))
	if msg := <-shortDone; msg != "" {
		t.Errorf("call to the 3-second server during the outage: %s", msg)
	}
	for deadline := time.Now().Add(60 * time.Second); ready() != 200; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("/readyz not 200 within 60 s of the engine's return (pool refill)")
			break
		}
	}
	t.Logf("ready again %s after the engine's return", time.Since(upAt).Round(time.Millisecond))
	time.Sleep(15 * time.Second)
	stop()
	clients.Wait()
	for _, cs := range sessions {
		cs.Close()
	}

	if !saw503.Load() {
		t.Error("/readyz never said 503 while the engine was away")
	}
	if !ready200After.Load() {
		t.Error("/readyz never said 200 after the engine came back")
	}
	tally.mu.Lock()
	defer tally.mu.Unlock()
	t.Logf("right: %v; infrastructure errors past the bound: %v", tally.ok, tally.infra)
	for _, f := range tally.failed {
		t.Errorf("wrong: %s", f)
	}
	for _, k := range kinds {
		if tally.ok[k.name] == 0 {
			t.Errorf("no %s call came back right", k.name)
		}
	}
	for k, n := range tally.infra {
		if k != "timeout" && k != "flood" {
			t.Errorf("%d %s calls failed with the engine error; only calls whose own timeout is shorter than the outage may", n, k)
		}
	}
	// The restart must have met calls: some waited for the engine and then ran.
	logs := srv.Logs.String()
	waitedCalls := strings.Count(logs, "engine back: running the call in a new sandbox")
	t.Logf("server log: %d calls waited for the engine and ran, %d sandboxes swept as untracked, %d warnings",
		waitedCalls, strings.Count(logs, "did not track"), strings.Count(logs, `"level":"warn"`))
	if waitedCalls == 0 {
		t.Error("no call waited for the engine: the restart met no call, the test proved nothing")
	}
	// Each server's stop (cleanup) checks that no container of its instance is left.
	t0 := time.Now()
	srv.Stop(t)
	short.Stop(t)
	t.Logf("servers stopped in %s", time.Since(t0).Round(time.Millisecond))
}
