package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestUnenforcedLimitsLive: against an engine known to drop the limits (rootless
// Podman on cgroup v1, as scripts/podman.sh --rootless sets up), the real binary must
// refuse to serve, naming each limit, and `mcp-exec selftest` must fail its
// limits_enforced line. It runs only when MCP_EXEC_TEST_EXPECT_UNENFORCED=1 says the
// engine (DOCKER_HOST) is such a one; scripts/test.sh sets it in its rootless step.
func TestUnenforcedLimitsLive(t *testing.T) {
	if os.Getenv("MCP_EXEC_TEST_EXPECT_UNENFORCED") != "1" {
		t.Skip("set MCP_EXEC_TEST_EXPECT_UNENFORCED=1 with DOCKER_HOST at an engine that ignores limits")
	}
	bin := e2e.Build(t)
	image := os.Getenv("MCP_EXEC_IMAGE")
	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
			"DOCKER_HOST=" + os.Getenv("DOCKER_HOST"), "MCP_EXEC_LOG_FORMAT=json"}
		if image != "" {
			cmd.Env = append(cmd.Env, "MCP_EXEC_IMAGE="+image)
		}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		cmd.Stdin = strings.NewReader("") // stdio transport: EOF right away if it ever served
		err := cmd.Run()
		if code = e2e.ExitCode(err); code == -1 {
			t.Fatalf("%v: %v", args, err)
		}
		return o.String(), e.String(), code
	}
	limits := []string{"memory (", "pids (", "cpus ("}

	_, stderr, code := run("serve", "--instance", "test-unenforced-serve", "--pool-size", "0")
	if code != 1 || !strings.Contains(stderr, "does not enforce the configured limits") ||
		!strings.Contains(stderr, "refusing to serve") {
		t.Errorf("serve: exit %d, stderr:\n%s\nwant exit 1 refusing to serve over unenforced limits", code, stderr)
	}
	for _, l := range limits {
		if !strings.Contains(stderr, l) {
			t.Errorf("serve: the refusal does not name %q:\n%s", l, stderr)
		}
	}

	stdout, stderr, code := run("selftest", "--instance", "test-unenforced-selftest")
	var line string
	for ln := range strings.SplitSeq(stdout, "\n") {
		if f := strings.Fields(ln); len(f) > 1 && f[1] == "limits_enforced" {
			line = ln
		}
	}
	if code == 0 || !strings.HasPrefix(line, "FAIL") {
		t.Errorf("selftest: exit %d, limits_enforced line %q; want a failure\nstdout:\n%s\nstderr:\n%s", code, line, stdout, stderr)
	}
	for _, l := range limits {
		if !strings.Contains(line, l) {
			t.Errorf("selftest: limits_enforced does not name %q: %s", l, line)
		}
	}
	t.Logf("selftest: %s", line)
}
