package e2e_test

// End-to-end test of code mode: the real binary with --upstreams naming a stdio
// upstream written on the TypeScript SDK (scripts/e2e/upstream.mjs), driven by the
// TypeScript SDK client (scripts/e2e/codemode.mjs) over stdio and streamable HTTP
// against the real engine and sandbox image: the tool list, the index in exec's
// description, tools_search, one exec calling upstream tools in a loop (in Python, then
// in JavaScript), a tool on
// the approve list asked through elicitation (accepted, then declined), and a session
// with code mode: a table loaded once, then three calls that each call upstream tools
// and use it, then two JavaScript calls in that session calling upstream tools in a loop.
//
// Needs what TestE2E needs (node, npm, an engine, the image). Outside CI a missing
// piece skips the test; with CI set it fails. Skipped with -short.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/e2e"
)

func TestE2ECodeMode(t *testing.T) {
	dir, node := e2e.Node(t)
	bin := e2e.Build(t)
	file := filepath.Join(t.TempDir(), "upstreams.json")
	conf := fmt.Sprintf(`{"mcpServers": {"records": {"command": %q, "args": [%q], "tools": ["lookup", "echo"], "approve": ["echo"]}}}`,
		node, filepath.Join(dir, "upstream.mjs"))
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// The cluster selection if set: scripts/k8s/ci.sh runs this test on the Kubernetes
	// backend too, with pods sized so that a session's fits beside the warm pool and a
	// call's replacement on the test cluster's node (2 CPUs: 2 x 0.5 pool, 0.5 the call's
	// replacement, 0.5 the session): with --cpus 1 the pool takes both, and a session
	// starts only if it wins a CPU a call's pod frees (docs/kubernetes.md, "Sizing the cluster").
	env := append(e2e.BackendEnv(), "MCP_EXEC_UPSTREAMS="+file, "MCP_EXEC_LANGUAGES=python,javascript,typescript")
	if os.Getenv("MCP_EXEC_BACKEND") == "kubernetes" {
		env = append(env, "MCP_EXEC_CPUS=0.5")
	}
	baseEnv := e2e.Env(env...)
	suffix := strconv.Itoa(os.Getpid())

	t.Run("http", func(t *testing.T) {
		srv := e2e.Serve(t, bin, baseEnv, "http", "e2e-codemode-http-"+suffix, "")
		r := e2e.RunScript(t, "codemode.mjs", node, dir, baseEnv, "--transport", "http", "--url", srv.Endpoint)
		if r.ExitCode != 0 {
			t.Logf("codemode.mjs stderr:\n%s", r.Stderr)
		}
		e2e.ExpectPass(t, r)
		e2eCodeModeSessionRan(t, r)
		e2eCodeModeJavaScriptRan(t, r)
		e2eCodeModeNoLeaks(t, srv.Logs.String())
	})

	t.Run("stdio", func(t *testing.T) {
		instance := "e2e-codemode-stdio-" + suffix
		env := append(append([]string{}, baseEnv...), "MCP_EXEC_INSTANCE="+instance)
		t.Cleanup(func() { e2e.AssertNoContainers(t, instance) })
		r := e2e.RunScript(t, "codemode.mjs", node, dir, env, "--transport", "stdio", "--cmd", bin)
		if r.ExitCode != 0 {
			t.Logf("codemode.mjs stderr:\n%s", r.Stderr)
		}
		e2e.ExpectPass(t, r)
		e2eCodeModeSessionRan(t, r)
		e2eCodeModeJavaScriptRan(t, r)
		e2eCodeModeNoLeaks(t, r.Stderr)
	})
}

// e2eCodeModeSessionRan checks that the session check ran rather than finding no
// session tools: every backend this test runs on (Docker, Podman, gVisor, Kubernetes)
// has sessions.
func e2eCodeModeSessionRan(t *testing.T, r e2e.ClientRun) {
	t.Helper()
	for _, c := range r.Report.Checks {
		if c.Name == "session_table_then_three_calls" {
			if !c.OK || strings.HasPrefix(c.Detail, "no sessions") {
				t.Errorf("the session check did not run with code mode: %s", c.Detail)
			}
			return
		}
	}
	t.Errorf("codemode.mjs has no session_table_then_three_calls check")
}

// e2eCodeModeJavaScriptRan checks that the JavaScript programs ran, one-shot and in a
// session, and the TypeScript one: the server offers both languages, and sessions.
func e2eCodeModeJavaScriptRan(t *testing.T, r e2e.ClientRun) {
	t.Helper()
	for _, name := range []string{"javascript_calls_in_a_loop", "javascript_session_calls_in_a_loop", "typescript_calls_in_a_loop"} {
		ran := false
		for _, c := range r.Report.Checks {
			if c.Name == name {
				ran = true
				if !c.OK || strings.HasPrefix(c.Detail, "no ") {
					t.Errorf("%s did not run with code mode: %s", name, c.Detail)
				}
			}
		}
		if !ran {
			t.Errorf("codemode.mjs has no %s check", name)
		}
	}
}

// e2eCodeModeNoLeaks checks that the server's log lines carry no result of a call
// (the records) and no line of the program's output.
func e2eCodeModeNoLeaks(t *testing.T, logs string) {
	t.Helper()
	if !strings.Contains(logs, `"tool call"`) {
		t.Errorf("the server logged no tool call line")
	}
	for line := range strings.Lines(logs) {
		if strings.HasPrefix(line, "{") && (strings.Contains(line, "record-") || strings.Contains(line, "total score")) {
			t.Errorf("server log line carries a result or output: %s", line)
		}
	}
}
