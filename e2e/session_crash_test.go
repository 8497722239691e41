package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// sessionStdio is a stdio server and the JSON-RPC answers it writes on stdout.
type sessionStdio struct {
	*crashServer
	out  *bufio.Scanner
	next int
}

// call sends a tools/call and returns its result's structured content and whether it
// is a tool error.
func (s *sessionStdio) call(t *testing.T, tool string, args map[string]any) (map[string]any, bool, string) {
	t.Helper()
	s.next++
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.next, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	io.WriteString(s.in, string(req)+"\n")
	for s.out.Scan() {
		var m struct {
			ID     int `json:"id"`
			Result struct {
				IsError           bool             `json:"isError"`
				StructuredContent map[string]any   `json:"structuredContent"`
				Content           []map[string]any `json:"content"`
			} `json:"result"`
		}
		if json.Unmarshal(s.out.Bytes(), &m) != nil || m.ID != s.next {
			continue
		}
		text := ""
		for _, c := range m.Result.Content {
			if s, ok := c["text"].(string); ok {
				text += s
			}
		}
		return m.Result.StructuredContent, m.Result.IsError, text
	}
	t.Fatalf("%s: the server ended before answering", tool)
	return nil, false, ""
}

// startSessionStdio starts bin serving stdio with args and initializes the session.
func startSessionStdio(t *testing.T, bin string, args ...string) *sessionStdio {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = e2e.Env() // under MCP_EXEC_TEST_RUNTIME, e.g. runsc, when set
	in, _ := cmd.StdinPipe()
	errs, _ := cmd.StderrPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &sessionStdio{crashServer: &crashServer{cmd: cmd, in: in, log: bufio.NewScanner(errs)}, out: bufio.NewScanner(out)}
	s.out.Buffer(make([]byte, 1<<20), 1<<20)
	crashWaitLog(t, s.log, "serving")
	go func() { // the log must keep draining
		for s.log.Scan() {
		}
	}()
	io.WriteString(in, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`+"\n")
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return s
}

// TestSessionExpiryAndRestart, against the real binary and engine, with the session
// pool on (its default size, 1): session_create takes the pooled sandbox and the pool
// refills with another; a session's container is gone once the session has expired
// (idle timeout), and its handle then gets a tool error that says it expired and to
// call session_create; a server killed with SIGKILL with a live session leaves its
// container and the pool's idle one, each labelled with its expiry and not the
// handle, and the next start of the same instance removes both before serving.
func TestSessionExpiryAndRestart(t *testing.T) {
	bin := e2e.Build(t)
	cli := launchertest.Client(t)
	if _, err := cli.Ping(t.Context(), client.PingOptions{}); err != nil {
		e2e.SkipOrFail(t, "no engine: %v", err)
	}
	instance := "test-session-crash-" + e2e.Random()
	be, err := docker.New(cli, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	list := crashList(t, be, instance)
	// Runs after the servers' own cleanups (which kill them): whatever a failed or
	// killed server left of the instance goes (the session pool's sandbox included).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ids, _ := be.List(ctx, instance) // not list: the test's context has ended
		for _, c := range ids {
			_ = be.Remove(ctx, c)
		}
	})
	args := []string{"--instance", instance, "--pool-size", "0", "--log-format", "json", "--session-idle-timeout-s", "3"}
	if image := os.Getenv("MCP_EXEC_IMAGE"); image != "" {
		args = append(args, "--image", image)
	}
	// sessionMode reports whether sandbox id is a session's (labelled with its expiry,
	// as the session pool's are from their create); false for one gone or of another
	// kind (the start-up limits check's).
	sessionMode := func(id string) bool {
		ins, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
		return err == nil && ins.Container.Config.Labels[launcher.LabelSessionExpires] != ""
	}
	// pooled waits until the session pool holds an idle sandbox beside the sessions'
	// (taken) and nothing else of the instance is there, and returns it. Only
	// session-mode sandboxes count: the limits check's sandbox, alone before the pool
	// starts, is not the pool's (under load the first wait once took it for the pool's).
	// keep, if not nil, is called about once a second meanwhile (a call that keeps a
	// session from its 3 s idle timeout: under gVisor a refill can take longer).
	pooled := func(keep func(), taken ...string) string {
		t.Helper()
		var idle []string
		last := time.Now()
		crashWait(t, 60*time.Second, func() bool {
			if keep != nil && time.Since(last) > time.Second {
				keep()
				last = time.Now()
			}
			idle = idle[:0]
			for _, id := range list() {
				switch {
				case slices.Contains(taken, id):
				case !sessionMode(id):
					return false // the limits check's, still there (or gone just now)
				default:
					idle = append(idle, id)
				}
			}
			return len(idle) == 1
		}, "the session pool did not refill")
		return idle[0]
	}

	s := startSessionStdio(t, bin, args...)
	p1 := pooled(nil) // the limits check's sandbox removed, the pool's there
	created, isErr, text := s.call(t, "session_create", map[string]any{})
	id, _ := created["session_id"].(string)
	if isErr || id == "" {
		t.Fatalf("session_create: error %v, %q", isErr, text)
	}
	if res, isErr, text := s.call(t, "exec", map[string]any{"code": "x = 41\nprint(x + 1)", "session_id": id}); isErr || res["stdout"] != "42\n" {
		t.Fatalf("exec in the session: error %v, %v, %q", isErr, res, text)
	}
	p2 := pooled(nil, p1) // the session runs in p1, taken from the pool (or ended already)
	crashWait(t, 30*time.Second, func() bool { return !slices.Contains(list(), p1) }, "the expired session's container was not removed")
	if got := list(); len(got) != 1 || got[0] != p2 {
		t.Fatalf("after the session's expiry: sandboxes %v, want the pool's %.12s only", got, p2)
	}
	if _, isErr, text := s.call(t, "exec", map[string]any{"code": "print(x)", "session_id": id}); !isErr ||
		!strings.Contains(text, "expired") || !strings.Contains(text, "session_create") {
		t.Fatalf("exec with the expired handle: error %v, %q; want a tool error that says expired and session_create", isErr, text)
	}

	// SIGKILL with a live session and an idle pooled sandbox, then a restart.
	created, isErr, text = s.call(t, "session_create", map[string]any{})
	id, _ = created["session_id"].(string)
	if isErr || id == "" {
		t.Fatalf("session_create: error %v, %q", isErr, text)
	}
	if res, isErr, _ := s.call(t, "exec", map[string]any{"code": "y = 1", "session_id": id}); isErr {
		t.Fatalf("exec in the second session: %v", res)
	}
	keep := func() {
		if _, isErr, text := s.call(t, "exec", map[string]any{"code": "pass", "session_id": id}); isErr {
			t.Fatalf("exec in the second session: %q", text)
		}
	}
	p3 := pooled(keep, p2) // the second session runs in p2
	keep()                 // its idle clock restarts: it outlives the SIGKILL below
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	left := list()
	if len(left) != 2 || !slices.Contains(left, p2) || !slices.Contains(left, p3) {
		t.Fatalf("after SIGKILL: sandboxes %v, want the session's %.12s and the pool's %.12s", left, p2, p3)
	}
	for _, c := range left {
		ins, err := cli.ContainerInspect(t.Context(), c, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		exp, err := strconv.ParseInt(ins.Container.Config.Labels[launcher.LabelSessionExpires], 10, 64)
		if err != nil || exp > time.Now().Add(time.Hour).Unix() {
			t.Errorf("sandbox %.12s: %s label %q, want a time at most the maximum lifetime (1 h) from now", c, launcher.LabelSessionExpires, ins.Container.Config.Labels[launcher.LabelSessionExpires])
		}
		if strings.Contains(string(ins.Raw), id) {
			t.Errorf("the session's handle is in container %.12s's record", c)
		}
	}
	r := startSessionStdio(t, bin, args...)
	for _, c := range list() {
		if slices.Contains(left, c) {
			t.Errorf("after restart: container %.12s is still there, want it removed before serving", c)
		}
	}
	if _, isErr, text := r.call(t, "exec", map[string]any{"code": "print(y)", "session_id": id}); !isErr || !strings.Contains(text, "session_create") {
		t.Errorf("exec with the handle after the restart: error %v, %q; want a tool error naming session_create", isErr, text)
	}
	// A clean stop (stdin closed) removes the restarted server's session pool.
	r.in.Close()
	if err := r.cmd.Wait(); err != nil {
		t.Errorf("the restarted server after its stdin closed: %v, want a clean exit", err)
	}
	if got := list(); len(got) != 0 {
		t.Errorf("after a clean stop: sandboxes %v, want none", got)
	}
}
