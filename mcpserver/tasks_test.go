package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// rawClient speaks raw JSON-RPC over an in-memory connection, as the go-sdk client
// cannot speak tasks.
type rawClient struct {
	t  *testing.T
	c  mcp.Connection
	id int64
}

// rawConnect connects a raw client to srv (its transport lifted when lift) and
// initializes at 2025-11-25; it returns the initialize result.
func rawConnect(t *testing.T, srv *mcp.Server, lift bool) (*rawClient, map[string]any) {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	var tr mcp.Transport = st
	if lift {
		tr = LiftTaskTransport(st)
	}
	ss, err := srv.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ct.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); ss.Wait() })
	rc := &rawClient{t: t, c: c}
	var init map[string]any
	if err := rc.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}}, &init); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(t.Context(), &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return rc, init
}

// call sends method and decodes its result into out; a JSON-RPC error is returned as
// a *jsonrpc.Error. Notifications in between are skipped.
func (rc *rawClient) call(method string, params any, out any) error {
	rc.t.Helper()
	rc.id++
	id, _ := jsonrpc.MakeID(float64(rc.id))
	p, _ := json.Marshal(params)
	if err := rc.c.Write(rc.t.Context(), &jsonrpc.Request{ID: id, Method: method, Params: p}); err != nil {
		rc.t.Fatal(err)
	}
	for {
		m, err := rc.c.Read(rc.t.Context())
		if err != nil {
			rc.t.Fatal(err)
		}
		resp, ok := m.(*jsonrpc.Response)
		if !ok || resp.ID != id {
			continue
		}
		if resp.Error != nil {
			var we *jsonrpc.Error
			if errors.As(resp.Error, &we) {
				return we
			}
			return resp.Error
		}
		if err := json.Unmarshal(resp.Result, out); err != nil {
			rc.t.Fatalf("%s: %v in %s", method, err, resp.Result)
		}
		return nil
	}
}

func (rc *rawClient) must(method string, params any) map[string]any {
	rc.t.Helper()
	var out map[string]any
	if err := rc.call(method, params, &out); err != nil {
		rc.t.Fatalf("%s: %v", method, err)
	}
	return out
}

func rpcCode(t *testing.T, err error) (int64, string) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("got %v, want a JSON-RPC error", err)
	}
	return we.Code, we.Message
}

func execTask(args map[string]any) map[string]any {
	return map[string]any{"name": toolName, "arguments": args, "task": map[string]any{"ttl": 60000}}
}

// TestTasksV1: the 2025-11-25 experimental tasks, in raw JSON-RPC as the TypeScript
// SDK sends them: the capability and exec's taskSupport are advertised; a call with
// task answers a working task whose taskId is a run_id; tasks/get, tasks/list and a
// blocking tasks/result (exactly exec's result, with the related-task _meta, even
// with the client's stray task field) follow; cancel of an ended task is -32602, of a
// running one cancels it; invalid input is a failed task whose result is the tool
// error; an unknown taskId is -32602.
func TestTasksV1(t *testing.T) {
	r := newSlowRunner(launcher.Result{Stdout: "done\n", ExitCode: 0})
	rc, init := rawConnect(t, New(r, Options{Runs: runOpts(8)}), true)
	caps := init["capabilities"].(map[string]any)
	if _, ok := caps["tasks"].(map[string]any)["requests"].(map[string]any)["tools"].(map[string]any)["call"]; !ok {
		t.Fatalf("initialize capabilities: %v, want tasks.requests.tools.call", caps)
	}
	tools := rc.must("tools/list", map[string]any{})["tools"].([]any)
	for _, tl := range tools {
		m := tl.(map[string]any)
		ex, _ := m["execution"].(map[string]any)
		if want := m["name"] == toolName; want != (ex["taskSupport"] == "optional") {
			t.Errorf("tool %v: execution %v", m["name"], m["execution"])
		}
	}

	created := rc.must("tools/call", execTask(map[string]any{"code": "print(1)"}))
	tk := created["task"].(map[string]any)
	id, _ := tk["taskId"].(string)
	if !strings.HasPrefix(id, "run_") || tk["status"] != "working" || tk["pollInterval"].(float64) != 1000 || tk["ttl"].(float64) <= 0 || tk["createdAt"] == nil {
		t.Fatalf("tools/call with task: %v", created)
	}
	<-r.started
	if g := rc.must("tasks/get", map[string]any{"taskId": id, "task": map[string]any{}}); g["status"] != "working" || g["taskId"] != id {
		t.Errorf("tasks/get while running: %v", g)
	}
	if l := rc.must("tasks/list", map[string]any{})["tasks"].([]any); len(l) != 1 || l[0].(map[string]any)["taskId"] != id {
		t.Errorf("tasks/list: %v", l)
	}
	go func() { time.Sleep(200 * time.Millisecond); close(r.release) }()
	res := rc.must("tasks/result", map[string]any{"taskId": id, "task": map[string]any{}})
	sc, _ := res["structuredContent"].(map[string]any)
	rel, _ := res["_meta"].(map[string]any)[metaRelated].(map[string]any)
	if sc["stdout"] != "done\n" || res["isError"] == true || rel["taskId"] != id {
		t.Errorf("tasks/result: %v", res)
	}
	if g := rc.must("tasks/get", map[string]any{"taskId": id}); g["status"] != "completed" {
		t.Errorf("tasks/get after the end: %v", g)
	}
	if code, _ := rpcCode(t, rc.call("tasks/cancel", map[string]any{"taskId": id}, new(any))); code != jsonrpc.CodeInvalidParams {
		t.Errorf("tasks/cancel of an ended task: code %d", code)
	}

	// Cancel a running one.
	r2 := newSlowRunner(launcher.Result{})
	rc2, _ := rawConnect(t, New(r2, Options{Runs: runOpts(8)}), true)
	id2 := rc2.must("tools/call", execTask(map[string]any{"code": "x"}))["task"].(map[string]any)["taskId"].(string)
	<-r2.started
	if c := rc2.must("tasks/cancel", map[string]any{"taskId": id2}); c["status"] != "cancelled" || c["taskId"] != id2 {
		t.Errorf("tasks/cancel: %v", c)
	}
	if r2.ctx(0).Err() == nil {
		t.Error("tasks/cancel left the run running")
	}

	// Invalid input: a task, failed, whose result is the tool error.
	bad := rc.must("tools/call", execTask(map[string]any{"code": "x", "timeout_s": 0}))["task"].(map[string]any)
	if bad["status"] != "failed" || bad["statusMessage"] == "" {
		t.Fatalf("task of an invalid call: %v", bad)
	}
	br := rc.must("tasks/result", map[string]any{"taskId": bad["taskId"]})
	if br["isError"] != true || !strings.Contains(br["content"].([]any)[0].(map[string]any)["text"].(string), "timeout_s") {
		t.Errorf("tasks/result of an invalid call: %v", br)
	}

	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		code, msg := rpcCode(t, rc.call(m, map[string]any{"taskId": "run_nosuchrun"}, new(any)))
		if code != jsonrpc.CodeInvalidParams || !strings.Contains(msg, "not found") {
			t.Errorf("%s of an unknown task: %d %q", m, code, msg)
		}
	}
}

// TestTasksLift: the SDK drops params.task: without LiftTask a task-augmented call is
// an ordinary call (and, as the TypeScript SDK parses it as CreateTaskResult, an
// error there); with it, a task.
func TestTasksLift(t *testing.T) {
	r := newSlowRunner(launcher.Result{Stdout: "ok\n"})
	close(r.release)
	srv := New(r, Options{Runs: runOpts(8)})
	plain, _ := rawConnect(t, srv, false)
	if res := plain.must("tools/call", execTask(map[string]any{"code": "x"})); res["task"] != nil || res["structuredContent"] == nil {
		t.Fatalf("without the lift: %v, want the ordinary result (the SDK drops task)", res)
	}
	lifted, _ := rawConnect(t, srv, true)
	if res := lifted.must("tools/call", execTask(map[string]any{"code": "x"})); res["task"] == nil {
		t.Fatalf("with the lift: %v, want a task", res)
	}

	// Over HTTP, the same function in front of the handler.
	h := LiftTaskHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		w.Write(b.Bytes())
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"code":"x"},"task":{"ttl":5}}}`)))
	var got struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	json.Unmarshal(rec.Body.Bytes(), &got)
	if got.Params["task"] != nil || !strings.Contains(string(got.Params["_meta"]), `"mcp-exec/task":{"ttl":5}`) {
		t.Errorf("LiftTaskHandler passed on %s", rec.Body)
	}
}

// TestTasksLimits: a task counts as a background run: over --max-background-runs a
// task-augmented call gets a JSON-RPC error naming the setting, and no task.
func TestTasksLimits(t *testing.T) {
	r := newSlowRunner(launcher.Result{})
	rc, _ := rawConnect(t, New(r, Options{Runs: runOpts(1), Vars: testVars}), true)
	rc.must("tools/call", execTask(map[string]any{"code": "x"}))
	code, msg := rpcCode(t, rc.call("tools/call", execTask(map[string]any{"code": "x"}), new(any)))
	if code != jsonrpc.CodeInvalidParams || !strings.Contains(msg, "--max-background-runs") {
		t.Errorf("a second task over the bound: %d %q", code, msg)
	}
	if l := rc.must("tasks/list", map[string]any{})["tasks"].([]any); len(l) != 1 {
		t.Errorf("tasks/list: %d tasks, want 1", len(l))
	}
	close(r.release)
}

// TestTasksOff: without background runs there are no tasks: no capability, no
// taskSupport, and the task methods are unknown (-32601).
func TestTasksOff(t *testing.T) {
	r := newSlowRunner(launcher.Result{Stdout: "ok\n"})
	close(r.release)
	rc, init := rawConnect(t, New(r, Options{}), true)
	if caps := init["capabilities"].(map[string]any); caps["tasks"] != nil || caps["extensions"] != nil {
		t.Errorf("capabilities without runs: %v", caps)
	}
	if res := rc.must("tools/call", execTask(map[string]any{"code": "x"})); res["task"] != nil {
		t.Errorf("a call with task without runs: %v", res)
	}
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"} {
		if code, _ := rpcCode(t, rc.call(m, map[string]any{"taskId": "run_x"}, new(any))); code != jsonrpc.CodeMethodNotFound {
			t.Errorf("%s without runs: code %d, want -32601", m, code)
		}
	}
}

// v2Client posts 2026-07-28 requests, one per HTTP request (no session), as tok.
type v2Client struct {
	t        *testing.T
	url, tok string
	declare  bool // the tasks extension in the client capabilities
}

func v2Server(t *testing.T, srv *mcp.Server) string {
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok != "alice" && tok != "bob" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "https://issuer " + tok, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

func (c v2Client) call(method, name string, params map[string]any) (map[string]any, *jsonrpc.Error) {
	c.t.Helper()
	caps := map[string]any{}
	if c.declare {
		caps["extensions"] = map[string]any{extTasks: map[string]any{}}
	}
	params["_meta"] = map[string]any{mcp.MetaKeyProtocolVersion: modernRevision,
		mcp.MetaKeyClientInfo: map[string]any{"name": "v2", "version": "1"}, mcp.MetaKeyClientCapabilities: caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", modernRevision)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	req.Header.Set("Authorization", "Bearer "+c.tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *jsonrpc.Error `json:"error"`
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"id":1`) {
			continue
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			c.t.Fatalf("%s: %v in %s", method, err, line)
		}
		return msg.Result, msg.Error
	}
	c.t.Fatalf("%s: HTTP %d and no response", method, resp.StatusCode)
	return nil, nil
}

func (c v2Client) must(method, name string, params map[string]any) map[string]any {
	c.t.Helper()
	res, err := c.call(method, name, params)
	if err != nil {
		c.t.Fatalf("%s: %d %s", method, err.Code, err.Message)
	}
	return res
}

// TestTasksV2: the 2026-07-28 extension over stateless HTTP: advertised; a declaring
// client's call that has not ended within the poll interval answers resultType
// "task" (flat, ttlMs, pollIntervalMs); tasks/get on later requests says working,
// then complete with the result inline (itself resultType "complete"); tasks/update
// and tasks/cancel are acknowledged; another identity's taskId, an unknown one and an
// expired one are -32602 (the first two the same text); without the capability the
// methods are -32021 and a call is an ordinary call; a call that ends at once is
// answered with its result.
func TestTasksV2(t *testing.T) {
	r := newSlowRunner(launcher.Result{Stdout: "done\n"})
	clock := newClock()
	url := v2Server(t, New(r, Options{Runs: clock.opts(3)}))
	alice, bob := v2Client{t, url, "alice", true}, v2Client{t, url, "bob", true}

	disc := alice.must("server/discover", "", map[string]any{})
	if _, ok := disc["capabilities"].(map[string]any)["extensions"].(map[string]any)[extTasks]; !ok {
		t.Errorf("server/discover: %v, want the tasks extension", disc)
	}

	tk := alice.must("tools/call", toolName, map[string]any{"name": toolName, "arguments": map[string]any{"code": "x"}})
	id, _ := tk["taskId"].(string)
	if tk["resultType"] != "task" || !strings.HasPrefix(id, "run_") || tk["status"] != "working" || tk["pollIntervalMs"].(float64) != 1000 || tk["ttlMs"].(float64) <= 0 {
		t.Fatalf("tools/call: %v, want a task", tk)
	}
	if g := alice.must("tasks/get", id, map[string]any{"taskId": id}); g["status"] != "working" || g["resultType"] != "complete" || g["result"] != nil {
		t.Errorf("tasks/get while running: %v", g)
	}
	if u := alice.must("tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{}}); u["resultType"] != "complete" {
		t.Errorf("tasks/update: %v", u)
	}
	_, unknown := bob.call("tasks/get", "run_nosuchrun", map[string]any{"taskId": "run_nosuchrun"})
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		if _, e := bob.call(m, id, map[string]any{"taskId": id}); e == nil || e.Code != jsonrpc.CodeInvalidParams || unknown == nil || e.Message != unknown.Message {
			t.Errorf("bob's %s of alice's task: %v, want %v", m, e, unknown)
		}
	}
	nocap := v2Client{t, url, "alice", false}
	if _, e := nocap.call("tasks/get", id, map[string]any{"taskId": id}); e == nil || e.Code != mcp.CodeMissingRequiredClientCapabilities {
		t.Errorf("tasks/get without the capability: %v, want -32021", e)
	}
	close(r.release)
	var g map[string]any
	for range 50 {
		if g = alice.must("tasks/get", id, map[string]any{"taskId": id}); g["status"] != "working" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, _ := g["result"].(map[string]any)
	if g["status"] != "completed" || res["resultType"] != "complete" || res["structuredContent"].(map[string]any)["stdout"] != "done\n" {
		t.Fatalf("tasks/get after the end: %v", g)
	}
	if c := alice.must("tasks/cancel", id, map[string]any{"taskId": id}); c["resultType"] != "complete" {
		t.Errorf("tasks/cancel: %v", c)
	}
	if _, e := alice.call("tasks/list", "", map[string]any{}); e == nil || e.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("tasks/list on 2026-07-28: %v, want -32601", e)
	}

	// Ended at once: the result itself. Without the capability: an ordinary call.
	for _, c := range []v2Client{alice, nocap} {
		if res := c.must("tools/call", toolName, map[string]any{"name": toolName, "arguments": map[string]any{"code": "x"}}); res["resultType"] == "task" || res["structuredContent"].(map[string]any)["stdout"] != "done\n" {
			t.Errorf("a call that ends at once (declared %t): %v", c.declare, res)
		}
	}

	// Calls answered inline hold no place under the bounds: more than Max of them.
	for range 10 {
		if res := alice.must("tools/call", toolName, map[string]any{"name": toolName, "arguments": map[string]any{"code": "x"}}); res["resultType"] == "task" || res["isError"] == true {
			t.Fatalf("a quick call with the capability: %v", res)
		}
	}

	clock.add(time.Hour)
	if _, e := alice.call("tasks/get", id, map[string]any{"taskId": id}); e == nil || e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "expired") {
		t.Errorf("tasks/get after the TTL: %v, want -32602 expired", e)
	}
}

// gateRunner ends a job at once, except one whose code is "slow", which runs until
// release is closed.
type gateRunner struct{ release chan struct{} }

func (gateRunner) Options() launcher.Options { return launcher.Options{} }

func (g gateRunner) Run(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	if job.Code == "slow" {
		select {
		case <-g.release:
		case <-ctx.Done():
			return launcher.Result{}, ctx.Err()
		}
	}
	return launcher.Result{Stdout: job.Code + "\n"}, nil
}

// TestTasksV2Bounds: a 2026-07-28 call answered inline holds no place under
// --max-background-runs (more of them than the bound, then a task still fits), and one
// the bounds refuse as a task runs as an ordinary call instead of failing.
func TestTasksV2Bounds(t *testing.T) {
	g := gateRunner{release: make(chan struct{})}
	url := v2Server(t, New(g, Options{Runs: runOpts(2)}))
	alice := v2Client{t, url, "alice", true}
	call := func(code string) map[string]any {
		return alice.must("tools/call", toolName, map[string]any{"name": toolName, "arguments": map[string]any{"code": code}})
	}
	for range 5 {
		if res := call("quick"); res["resultType"] == "task" || res["isError"] == true {
			t.Fatalf("a quick call: %v", res)
		}
	}
	time.AfterFunc(4*time.Second, func() { close(g.release) })
	for i := range 2 {
		if res := call("slow"); res["resultType"] != "task" {
			t.Fatalf("slow call %d after quick ones: %v, want a task (inline answers must not hold places)", i, res)
		}
	}
	res := call("slow") // over the bound: an ordinary call, answered when the gate opens
	if sc, _ := res["structuredContent"].(map[string]any); res["isError"] == true || sc["stdout"] != "slow\n" {
		t.Errorf("a call over the bound: %v, want the ordinary result", res)
	}
}

// TestTasksV1Progress: a 2025-11-25 task whose call carried a progress token gets
// notifications/progress for that token after the task was created, while it runs.
func TestTasksV1Progress(t *testing.T) {
	r := newSlowRunner(launcher.Result{Stdout: "ok\n"})
	defer close(r.release)
	rc, _ := rawConnect(t, New(r, Options{Runs: runOpts(4)}), true)
	p := execTask(map[string]any{"code": "x"})
	p["_meta"] = map[string]any{"progressToken": "tok-1"}
	rc.must("tools/call", p)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for {
		m, err := rc.c.Read(ctx)
		if err != nil {
			t.Fatalf("no progress notification within 5 s: %v", err)
		}
		if n, ok := m.(*jsonrpc.Request); ok && n.Method == "notifications/progress" {
			var pp struct {
				ProgressToken string `json:"progressToken"`
				Message       string `json:"message"`
			}
			json.Unmarshal(n.Params, &pp)
			if pp.ProgressToken != "tok-1" || pp.Message == "" {
				t.Errorf("progress: %s", n.Params)
			}
			return
		}
	}
}
