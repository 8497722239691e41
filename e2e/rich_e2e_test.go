package e2e_test

// End-to-end test of the exec tool's rich features: the real binary, driven by the
// TypeScript SDK (scripts/e2e/rich.mjs) over stdio and streamable HTTP against the real
// engine and sandbox image. A matplotlib chart comes back as a PNG image, a CSV passed
// in is read by pandas, a file written to /tmp/outputs comes back byte for byte, path
// traversal in file names is refused, progress notifications arrive, and a cancelled
// call's sandbox is gone within 2 s.
//
// Needs what TestE2E needs (node, npm, an engine, the image) plus the docker CLI, which
// rich.mjs uses to watch the server's sandboxes. Outside CI a missing piece skips the
// test; with CI set it fails. Skipped with -short.

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/e2e"
)

func TestE2ERich(t *testing.T) {
	dir, node := e2e.Node(t)
	bin := e2e.Build(t)
	docker, err := exec.LookPath("docker")
	if err != nil {
		e2e.SkipOrFail(t, "docker CLI not found (%v): rich.mjs lists the server's sandboxes with it", err)
	}

	// Cold mode: the cancellation check expects no sandbox of the instance but the
	// running one, and a warm pool keeps idle ones.
	baseEnv := e2e.Env("MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_SESSION_POOL_SIZE=0") // rich.mjs counts the one-shot call's sandbox
	suffix := strconv.Itoa(os.Getpid())

	t.Run("http", func(t *testing.T) {
		instance := "e2e-rich-http-" + suffix
		srv := e2e.Serve(t, bin, baseEnv, "http", instance, "")
		r := e2eRunRich(t, node, dir, baseEnv, "--transport", "http", "--url", srv.Endpoint, "--instance", instance, "--docker", docker)
		e2e.ExpectPass(t, r)
		e2eRichNoLeaks(t, srv.Logs.String())
	})

	t.Run("stdio", func(t *testing.T) {
		instance := "e2e-rich-stdio-" + suffix
		// rich.mjs spawns the server with its own environment; the server logs to its
		// stderr, which rich.mjs passes through to ours.
		env := append(append([]string{}, baseEnv...), "MCP_EXEC_INSTANCE="+instance)
		t.Cleanup(func() { e2e.AssertNoContainers(t, instance) })
		r := e2eRunRich(t, node, dir, env, "--transport", "stdio", "--cmd", bin, "--instance", instance, "--docker", docker)
		e2e.ExpectPass(t, r)
		e2eRichNoLeaks(t, r.Stderr)
	})
}

// e2eRunRich runs rich.mjs with env as its whole environment.
func e2eRunRich(t *testing.T, node, dir string, env []string, args ...string) e2e.ClientRun {
	t.Helper()
	r := e2e.RunScript(t, "rich.mjs", node, dir, env, args...)
	if r.ExitCode != 0 {
		t.Logf("rich.mjs stderr:\n%s", r.Stderr)
	}
	return r
}

// e2eRichNoLeaks checks the server's log for caller data that rich.mjs sends or makes
// the program print: file names and contents, and the output progress messages quote.
func e2eRichNoLeaks(t *testing.T, logs string) {
	t.Helper()
	for _, s := range []string{"notes ü.txt", "ünïcödé", "city,amount", "sleeping", "step 3", "report.json"} {
		// rich.mjs's own lines on stderr mention some of these in check details; only
		// the server's JSON log lines count.
		for line := range strings.Lines(logs) {
			if strings.HasPrefix(line, "{") && strings.Contains(line, s) {
				t.Errorf("server log line contains caller data %q: %s", s, line)
			}
		}
	}
}
