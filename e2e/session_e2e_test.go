package e2e_test

// End-to-end test of sessions: the real binary over streamable HTTP (with a token),
// driven by the TypeScript SDK (scripts/e2e/session.mjs) through a data-analysis
// sequence in one session against the real engine and sandbox image: a CSV loaded
// into pandas once and queried by later calls, a file in /tmp across calls, an
// exception that keeps the state, a timeout that rolls it back, a one-shot exec that
// sees none of it, session_close, and the closed handle's error. The server's log
// must hold none of the caller's data and never the handle whole.
//
// Needs what TestE2ERich needs (node, npm, an engine, the image, the docker CLI).
// Outside CI a missing piece skips the test; with CI set it fails. Skipped with -short.

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/e2e"
)

func TestE2ESession(t *testing.T) {
	if rt := os.Getenv("MCP_EXEC_TEST_RUNTIME"); strings.HasPrefix(rt, "runsc") {
		t.Skipf("MCP_EXEC_TEST_RUNTIME=%s: the server offers no sessions under gVisor (docs/sessions.md)", rt)
	}
	dir, node := e2e.Node(t)
	bin := e2e.Build(t)
	docker, err := exec.LookPath("docker")
	if err != nil {
		e2e.SkipOrFail(t, "docker CLI not found (%v): session.mjs counts the session's container with it", err)
	}
	// No warm pool: session.mjs counts the instance's containers (the session's, the
	// session pool's, and those of the pool only after session_close), which a warm
	// pool's idle sandboxes would add to. The session pool has its default size, 1.
	env := e2e.Env("MCP_EXEC_POOL_SIZE=0")
	instance := "e2e-session-" + strconv.Itoa(os.Getpid())
	token := e2e.Random()
	srv := e2e.Serve(t, bin, env, "http", instance, token)

	var rep struct {
		e2e.Report
		SessionID string `json:"session_id"`
	}
	nr := e2e.RunNode(t, e2e.ClientTimeout, "session.mjs", node, dir, env, &rep,
		"--transport", "http", "--url", srv.Endpoint, "--token", token, "--instance", instance, "--docker", docker, "--session-pool", "1")
	if nr.ExitCode != 0 {
		t.Logf("session.mjs stderr:\n%s", nr.Stderr)
	}
	e2e.ExpectPass(t, e2e.ClientRun{NodeRun: nr, Report: rep.Report})
	srv.Stop(t) // flushes the log; also checks that no container is left

	logs := srv.Logs.String()
	if len(rep.SessionID) < 22 {
		t.Fatalf("session.mjs reported session_id %q, want the handle", rep.SessionID)
	}
	if strings.Contains(logs, rep.SessionID) {
		t.Errorf("the server logged the session's handle whole")
	}
	// Positive control: the session's lifecycle is in the log, under its short hash.
	for _, msg := range []string{`"session created"`, `"session closed"`} {
		if !strings.Contains(logs, msg) {
			t.Errorf("no %s line in the server's log", msg)
		}
	}
	for _, s := range []string{"sales.csv", "top5.csv", "id,region", "bad query", "df-mutated", "north", "revenue"} {
		for line := range strings.Lines(logs) {
			if strings.HasPrefix(line, "{") && strings.Contains(line, s) {
				t.Errorf("server log line contains caller data %q: %s", s, line)
			}
		}
	}
}
