package e2e_test

// Long runs: a program that runs longer than the client's request timeout
// completes for a client that resets the timeout on progress, and the same call
// without the reset fails, which proves the reset (fed by the server's progress
// notifications) is what carried it. The client is the TypeScript SDK
// (scripts/e2e/longrun.mjs) with its timeout lowered from 60 s to
// longrunTimeout to keep the test short; the program runs longrunRun, more than
// twice that. Over streamable HTTP with the token as Authorization: Bearer, and
// over stdio. Skipped with -short; outside CI a missing engine or node skips.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// The CI sizes. MCP_EXEC_TEST_LONGRUN_FULL=1 runs the real case instead: the
// TypeScript SDK's default 60 s timeout and a 90 s program.
var (
	longrunTimeout = 6 * time.Second
	longrunRun     = 15 * time.Second
)

func init() {
	if os.Getenv("MCP_EXEC_TEST_LONGRUN_FULL") == "1" {
		longrunTimeout, longrunRun = 60*time.Second, 90*time.Second
	}
}

type longrunCall struct {
	Completed       bool    `json:"completed"`
	TimedOut        bool    `json:"timed_out"`
	Error           string  `json:"error"`
	ElapsedMS       int64   `json:"elapsed_ms"`
	ProgressCount   int     `json:"progress_count"`
	FirstProgressMS *int64  `json:"first_progress_ms"`
	MaxGapMS        *int64  `json:"max_gap_ms"`
	MeanGapMS       *int64  `json:"mean_gap_ms"`
	LastMessage     *string `json:"last_message"`
}

func TestLongRunResetsTimeoutOnProgress(t *testing.T) {
	dir, node := e2e.Node(t)
	bin, env := protoSetup(t)
	suffix := strconv.Itoa(os.Getpid())
	token := e2e.Random()
	srv := e2e.Serve(t, bin, env, "http", "longrun-http-"+suffix, token)

	args := []string{"--timeout-ms", strconv.FormatInt(longrunTimeout.Milliseconds(), 10),
		"--run-s", strconv.Itoa(int(longrunRun / time.Second))}
	t.Run("http", func(t *testing.T) {
		longrunCheck(t, node, dir, env, append([]string{"--transport", "http", "--url", srv.Endpoint, "--token", token}, args...))
		// The call the client gave up on was cancelled and its sandbox stopped,
		// not left to run its 15 s: the server logged it as canceled.
		srv.Stop(t)
		if n := longrunCountLog(srv.Logs.String(), "exec canceled"); n != 1 {
			t.Errorf("server logged %d cancelled execs, want 1 (the call without reset)", n)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		instance := "longrun-stdio-" + suffix
		stdioEnv := append(append([]string{}, env...), "MCP_EXEC_INSTANCE="+instance, "MCP_EXEC_LOG_LEVEL=warn")
		longrunCheck(t, node, dir, stdioEnv, append([]string{"--transport", "stdio", "--cmd", bin}, args...))
		e2e.AssertNoContainers(t, instance)
	})
}

func longrunCheck(t *testing.T, node, dir string, env, args []string) {
	t.Helper()
	var rep struct {
		OK           bool        `json:"ok"`
		Error        string      `json:"error"`
		WithReset    longrunCall `json:"with_reset"`
		WithoutReset longrunCall `json:"without_reset"`
	}
	r := e2e.RunNode(t, 3*time.Minute+3*longrunRun, "longrun.mjs", node, dir, env, &rep, args...)
	w, wo := rep.WithReset, rep.WithoutReset
	t.Logf("with reset: completed %t in %d ms, %d progress notifications (first at %v ms, mean gap %v ms, max gap %v ms)",
		w.Completed, w.ElapsedMS, w.ProgressCount, deref(w.FirstProgressMS), deref(w.MeanGapMS), deref(w.MaxGapMS))
	t.Logf("without reset: completed %t, timed out %t after %d ms (%q), %d progress notifications",
		wo.Completed, wo.TimedOut, wo.ElapsedMS, wo.Error, wo.ProgressCount)
	if r.ExitCode != 0 || !rep.OK {
		t.Errorf("longrun.mjs: exit %d, ok %t, error %q\nstderr:\n%s", r.ExitCode, rep.OK, rep.Error, r.Stderr)
	}
	if !w.Completed || w.ElapsedMS < longrunRun.Milliseconds() {
		t.Errorf("with reset: completed %t after %d ms, want the whole %s run", w.Completed, w.ElapsedMS, longrunRun)
	}
	// The reset only works if progress comes well within the timeout, all along.
	if w.MaxGapMS == nil || *w.MaxGapMS >= longrunTimeout.Milliseconds()/2 || w.FirstProgressMS == nil || *w.FirstProgressMS >= longrunTimeout.Milliseconds()/2 {
		t.Errorf("with reset: first progress at %v ms, largest gap %v ms; want both under %s", deref(w.FirstProgressMS), deref(w.MaxGapMS), longrunTimeout/2)
	}
	if w.LastMessage == nil || !strings.Contains(*w.LastMessage, fmt.Sprintf("of %d", int(longrunRun/time.Second))) {
		t.Errorf("last progress message %v, want one quoting the program's last line", deref(w.LastMessage))
	}
	if wo.Completed || !wo.TimedOut || wo.ElapsedMS >= longrunRun.Milliseconds() {
		t.Errorf("without reset: completed %t, timed out %t after %d ms; want the client's timeout before the run ends", wo.Completed, wo.TimedOut, wo.ElapsedMS)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// longrunCountLog counts JSON log lines with message msg.
func longrunCountLog(logs, msg string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == msg {
			n++
		}
	}
	return n
}
