package e2e_test

// A client process of background runs, for the tests that kill one in the middle of a
// run (TestBackgroundRunsE2E, TestBackgroundSoak): this test binary run again with
// MCP_EXEC_BG_CLIENT set, so that what is killed is a real process holding real
// connections, and the server sees them drop as it would a crashed agent's.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// bgOut is the structured content of exec, run_wait and run_cancel, field by field.
type bgOut struct {
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	StdoutTail string `json:"stdout_tail"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exit_code"`
	TimedOut   bool   `json:"timed_out"`
	Files      []struct {
		Name string `json:"name"`
		Size int64  `json:"size"`
	} `json:"files"`
}

// bgTry calls tool; a tool error is isErr with its text, a protocol error err. It
// never ends the test, so goroutines may call it.
func bgTry(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (o bgOut, text string, isErr bool, err error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return o, "", false, err
	}
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &o)
	return o, toolText(res), res.IsError, nil
}

// bgClientProcess is a client process started by bgStartInProcess.
type bgClientProcess struct {
	cmd *exec.Cmd
	ID  string // the run's handle, as the process printed it
}

// bgStartInProcess starts a client process that connects to endpoint with token, calls
// exec with args (background set) and prints the run's handle, then waits for the run
// with run_wait (2 s at a time) until it is killed; it returns once the handle is
// printed.
func bgStartInProcess(ctx context.Context, endpoint, token string, args map[string]any) (*bgClientProcess, error) {
	args["background"] = true
	a, _ := json.Marshal(args)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBackgroundClientProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MCP_EXEC_BG_CLIENT="+endpoint, "MCP_EXEC_BG_TOKEN="+token, "MCP_EXEC_BG_ARGS="+string(a))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &bgClientProcess{cmd: cmd}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if id, ok := strings.CutPrefix(lines.Text(), "run_id "); ok {
			p.ID = id
			return p, nil
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("the client process printed no run_id: %s", stderr.String())
}

// Kill SIGKILLs the client process and reaps it.
func (p *bgClientProcess) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// TestBackgroundClientProcess is the client process of bgStartInProcess (skipped
// unless MCP_EXEC_BG_CLIENT is set).
func TestBackgroundClientProcess(t *testing.T) {
	url := os.Getenv("MCP_EXEC_BG_CLIENT")
	if url == "" {
		t.Skip("a client process of background runs: run by the tests that kill one")
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(os.Getenv("MCP_EXEC_BG_ARGS")), &args); err != nil {
		t.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: e2e.HeaderTransport{Token: os.Getenv("MCP_EXEC_BG_TOKEN")}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bg-client-process", Version: "1"}, nil).Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	o, text, isErr, err := bgTry(t.Context(), cs, "exec", args)
	if err != nil || isErr || o.RunID == "" {
		t.Fatalf("exec: %v %s", err, text)
	}
	fmt.Printf("run_id %s\n", o.RunID)
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		bgTry(t.Context(), cs, "run_wait", map[string]any{"run_id": o.RunID, "timeout_s": 2})
	}
}
