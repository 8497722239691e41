package e2e_test

// End-to-end test of exec's "language": the real binary, driven by the TypeScript SDK
// (scripts/e2e/languages.mjs) over stdio against the real engine and sandbox image. A
// bash pipeline turns an input CSV into JSON with sqlite3 and jq; a JavaScript program
// with top-level await reads stdin and writes a file to /tmp/outputs; a TypeScript one
// runs with its types stripped and its lines in its stack; failures are
// results, an unknown language a tool error. Needs what TestE2E needs; skipped with
// -short.

import (
	"os"
	"os/exec"
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

// TestRunLanguage: `mcp-exec run --language` runs the file in that language, its
// output and exit code the program's; one not in --languages is refused before any
// sandbox, naming both settings.
func TestRunLanguage(t *testing.T) {
	bin := e2e.Build(t)
	for _, tt := range []struct{ lang, code, want string }{
		{"bash", "echo $((6 * 7)) | tr 4 x; exit 3", "x2\n"},
		{"javascript", "await Promise.resolve();\nconsole.log(6 * 7);\nprocess.exitCode = 3", "42\n"},
		{"typescript", "const n: number = await Promise.resolve<number>(6);\nconsole.log(n * 7);\nprocess.exitCode = 3", "42\n"},
	} {
		cmd := exec.Command(bin, "run", "--language", tt.lang, "-")
		cmd.Env = e2e.Env("MCP_EXEC_LOG_LEVEL=warn")
		cmd.Stdin = strings.NewReader(tt.code)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if code := cmd.ProcessState.ExitCode(); code != 3 || string(out) != tt.want {
			t.Errorf("%s: exit %d (%v), stdout %q, want 3 and %q; stderr %s", tt.lang, code, err, out, tt.want, stderr.String())
		}
	}
	cmd := exec.Command(bin, "run", "--language", "bash", "-")
	cmd.Env = e2e.Env("MCP_EXEC_LANGUAGES=python")
	cmd.Stdin = strings.NewReader("echo hi")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), `--language "bash" is not one of --languages (MCP_EXEC_LANGUAGES): python`) {
		t.Errorf("bash with --languages python: exit %d, output %q: want 2 and the refusal", cmd.ProcessState.ExitCode(), out)
	}
}
