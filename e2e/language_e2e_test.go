package e2e_test

// End-to-end test of exec's "language": the real binary, driven by the TypeScript SDK
// (scripts/e2e/languages.mjs) over stdio against the real engine and sandbox image. A
// bash pipeline turns an input CSV into JSON with sqlite3 and jq; a JavaScript program
// with top-level await reads stdin and writes a file to /tmp/outputs; failures are
// results, an unknown language a tool error. Needs what TestE2E needs; skipped with
// -short.

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/e2e"
)

func TestE2ELanguages(t *testing.T) {
	dir, node := e2e.Node(t)
	bin := e2e.Build(t)
	instance := "e2e-languages-" + strconv.Itoa(os.Getpid())
	env := e2e.Env("MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_SESSION_POOL_SIZE=0", "MCP_EXEC_INSTANCE="+instance)
	t.Cleanup(func() { e2e.AssertNoContainers(t, instance) })
	r := e2e.RunScript(t, "languages.mjs", node, dir, env, "--transport", "stdio", "--cmd", bin)
	if r.ExitCode != 0 {
		t.Logf("languages.mjs stderr:\n%s", r.Stderr)
	}
	e2e.ExpectPass(t, r)
	// The server's log: the language, never the programs or their data.
	for _, s := range []string{"Berlin", "sales.csv", "squares", "bad input"} {
		for line := range strings.Lines(r.Stderr) {
			if strings.HasPrefix(line, "{") && strings.Contains(line, s) {
				t.Errorf("server log line contains caller data %q: %s", s, line)
			}
		}
	}
	if !strings.Contains(r.Stderr, `"language":"bash"`) || !strings.Contains(r.Stderr, `"languages checked: a program ran in each"`) {
		t.Errorf("server log lacks the language of a call or the start-up check:\n%s", r.Stderr)
	}
}
