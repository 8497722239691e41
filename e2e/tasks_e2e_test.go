package e2e_test

// MCP tasks on the real binary over streamable HTTP, on the Docker engine: the
// TypeScript SDK client's callToolStream runs a task to its result, and a NEW client
// process fetches another task's result by its id (getTask, getTaskResult); a
// 2026-07-28 client of ours (raw JSON-RPC from the extension's schema) declares the
// tasks extension, gets a task for a 5 s program and polls tasks/get, each poll on a
// new connection, until the result comes inline. Skipped with -short.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

func TestTasksE2E(t *testing.T) {
	e2e.SkipShort(t)
	dir, node := e2e.Node(t)
	bin, env := protoSetup(t, "MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_MAX_SESSIONS=0")
	token := e2e.Random()
	srv := e2e.Serve(t, bin, env, "http", "tasks-"+strconv.Itoa(os.Getpid()), token)

	t.Run("typescript 2025-11-25", func(t *testing.T) {
		var rep map[string]any
		r := e2e.RunNode(t, 3*time.Minute, "tasks.mjs", node, dir, env, &rep, "--phase", "stream", "--url", srv.Endpoint, "--token", token)
		t.Logf("stream: %v", rep)
		id, _ := rep["task_id"].(string)
		if r.ExitCode != 0 || rep["ok"] != true || id == "" {
			t.Fatalf("tasks.mjs stream: exit %d, %v\nstderr:\n%s", r.ExitCode, rep, r.Stderr)
		}
		var rep2 map[string]any
		r = e2e.RunNode(t, 3*time.Minute, "tasks.mjs", node, dir, env, &rep2, "--phase", "fetch", "--url", srv.Endpoint, "--token", token, "--task-id", id)
		t.Logf("fetch: %v", rep2)
		if r.ExitCode != 0 || rep2["ok"] != true {
			t.Errorf("tasks.mjs fetch by a new process: exit %d, %v\nstderr:\n%s", r.ExitCode, rep2, r.Stderr)
		}
	})

	t.Run("ours 2026-07-28", func(t *testing.T) {
		code := "import time\ntime.sleep(5)\nprint('slept')"
		tk := tasksPost(t, srv.Endpoint, token, "tools/call", "exec", map[string]any{"name": "exec", "arguments": map[string]any{"code": code}})
		id, _ := tk["taskId"].(string)
		if tk["resultType"] != "task" || !strings.HasPrefix(id, "run_") || tk["ttlMs"] == nil || tk["pollIntervalMs"] == nil {
			t.Fatalf("tools/call of a 5 s program: %v, want a task", tk)
		}
		deadline := time.Now().Add(2 * time.Minute)
		polls := 0
		for {
			g := tasksPost(t, srv.Endpoint, token, "tasks/get", id, map[string]any{"taskId": id})
			polls++
			if g["status"] != "working" {
				res, _ := g["result"].(map[string]any)
				sc, _ := res["structuredContent"].(map[string]any)
				if g["status"] != "completed" || res["resultType"] != "complete" || sc["stdout"] != "slept\n" {
					t.Fatalf("tasks/get after the end: %v", g)
				}
				t.Logf("completed after %d polls", polls)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("task still working after 2 min: %v", g)
			}
			time.Sleep(time.Duration(g["pollIntervalMs"].(float64)) * time.Millisecond)
		}
	})
}

// TestTasksStdioE2E: over stdio (raw JSON-RPC lines to the real binary), a tools/call
// with task answers a task, and tasks/result its result: the binary lifts params.task
// on this transport too. The run ends with the server; nothing is left on the engine.
func TestTasksStdioE2E(t *testing.T) {
	e2e.SkipShort(t)
	bin, env := protoSetup(t, "MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_MAX_SESSIONS=0")
	instance := "tasks-stdio-" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(bin)
	cmd.Env = append(append([]string{}, env...), "MCP_EXEC_INSTANCE="+instance, "MCP_EXEC_LOG_LEVEL=warn")
	cmd.Stderr = io.Discard
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 4<<20)
	call := func(id int, method string, params any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		in.Write(append(b, '\n'))
		for lines.Scan() {
			var msg struct {
				ID     int             `json:"id"`
				Result map[string]any  `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(lines.Bytes(), &msg) != nil || msg.ID != id {
				continue
			}
			if msg.Error != nil {
				t.Fatalf("%s: %s", method, msg.Error)
			}
			return msg.Result
		}
		t.Fatalf("%s: no answer (%v)", method, lines.Err())
		return nil
	}
	call(1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "stdio-tasks", "version": "1"}})
	in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	created := call(2, "tools/call", map[string]any{"name": "exec", "arguments": map[string]any{"code": "print('via task')"}, "task": map[string]any{}})
	tk, _ := created["task"].(map[string]any)
	id, _ := tk["taskId"].(string)
	if !strings.HasPrefix(id, "run_") {
		t.Fatalf("tools/call with task over stdio: %v, want a task", created)
	}
	res := call(3, "tasks/result", map[string]any{"taskId": id})
	if sc, _ := res["structuredContent"].(map[string]any); sc["stdout"] != "via task\n" {
		t.Errorf("tasks/result: %v", res)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the server after its input closed: %v", err)
	}
	e2e.AssertNoContainers(t, instance)
}

// tasksPost sends one 2026-07-28 request declaring the tasks extension, on a new
// connection, and returns its result (a JSON-RPC error fails the test).
func tasksPost(t *testing.T, url, token, method, name string, params map[string]any) map[string]any {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "tasks-v2", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	req.Header.Set("Authorization", "Bearer "+token)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"id":1`) {
			continue
		}
		var msg struct {
			Result map[string]any  `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("%s: %v in %s", method, err, line)
		}
		if msg.Error != nil {
			t.Fatalf("%s: error %s", method, msg.Error)
		}
		return msg.Result
	}
	t.Fatalf("%s: HTTP %d and no response", method, resp.StatusCode)
	return nil
}
