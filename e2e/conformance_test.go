package e2e_test

// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// scripts/e2e) against the binary over streamable HTTP: every server scenario of the
// suite runs, and the suite's own baseline check fails the test on a scenario that
// fails or warns without being listed in scripts/e2e/conformance-baseline.yml (with why
// it cannot apply), and on a listed one that passes. Needs Node.js 22 (inspectorNode).

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

func TestConformance(t *testing.T) {
	dir := e2e.Scripts(t)
	node := inspectorNode(t, dir)
	bin, env := protoSetup(t)
	// No token: the suite sends none; the server listens on loopback only.
	srv := e2e.Serve(t, bin, env, "http", "conformance-"+strconv.Itoa(time.Now().Nanosecond()), "")

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", srv.Endpoint, "--suite", "all",
		"--expected-failures", filepath.Join(dir, "conformance-baseline.yml"), "-o", t.TempDir())
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, env...), "HOME="+t.TempDir(), "NO_COLOR=1")
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("conformance suite: %v (a scenario failed or warned outside the baseline, or a baseline entry now passes)\n%s", err, out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("Baseline check passed")) {
		t.Fatalf("conformance suite: no baseline verdict in its output\n%s", out.String())
	}
	t.Logf("conformance suite:\n%s", tail(out.Bytes(), 40))
}

// tail is the last n lines of b.
func tail(b []byte, n int) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, nil)
}
