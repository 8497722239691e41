package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

// logLines parses the captured JSON log lines.
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for l := range strings.Lines(s) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: got %v, want JSON", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// canaryFreeLines checks that the log out holds no canary and n lines (what they
// are), and returns them parsed.
func canaryFreeLines(t *testing.T, out, canary string, n int, what string) []map[string]any {
	t.Helper()
	if strings.Contains(out, canary) {
		t.Fatalf("log: got the canary in\n%s\nwant no caller data", out)
	}
	lines := logLines(t, out)
	if len(lines) != n {
		t.Fatalf("log lines: got %d\n%s\nwant %d (%s)", len(lines), out, n, what)
	}
	return lines
}

func TestLogsCarryNoCallerData(t *testing.T) {
	canary := "canary-" + rand.Text()
	var buf syncbuf.Buffer
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{
		Logger:       zerolog.New(&buf).Level(zerolog.TraceLevel),
		MaxCodeBytes: 200,
	})
	calls := []struct {
		name string
		res  launcher.Result
		err  error
		args string
	}{
		{"ok", launcher.Result{Stdout: canary, Stderr: canary, ExitCode: 1, Duration: 7 * time.Millisecond}, nil,
			`{"code":"print('` + canary + `')","stdin":"` + canary + `"}`},
		{"runner error", launcher.Result{}, launcher.ErrSandbox, `{"code":"` + canary + `"}`},
		{"rejected", launcher.Result{}, nil, `{"code":"` + canary + strings.Repeat("x", 200) + `"}`},
		{"sdk rejected", launcher.Result{}, nil, `{"code":"` + canary + `","` + canary + `":1}`},
	}
	for _, c := range calls {
		r.set(c.res, c.err)
		call(t, t.Context(), cs, c.args)
	}
	lines := canaryFreeLines(t, buf.String(), canary, 4, "done, its timing (debug), failed, rejected")
	timing := lines[1]
	lines = slices.Delete(lines, 1, 2)
	done := lines[0]
	for _, key := range []string{"exec_id", "code_bytes", "stdin_bytes", "timeout_ms", "exit_code", "duration_ms",
		"stdout_bytes", "stderr_bytes", "truncated", "timed_out", "oom_killed"} {
		if _, ok := done[key]; !ok {
			t.Errorf("info line %v: got no %q, want it", done, key)
		}
	}
	if got, want := done["level"], "info"; got != want {
		t.Errorf("info line level: got %v, want %v", got, want)
	}
	if got, want := done["exit_code"], 1.0; got != want {
		t.Errorf("info line exit_code: got %v, want %v", got, want)
	}
	if got, want := done["duration_ms"], 7.0; got != want {
		t.Errorf("info line duration_ms: got %v, want %v", got, want)
	}
	if got, want := lines[1]["level"], "error"; got != want {
		t.Errorf("runner error line level: got %v, want %v", got, want)
	}
	if got, want := lines[2]["field"], "code"; got != want {
		t.Errorf("rejected line field: got %v, want %v", got, want)
	}
	if got, want := timing["message"], "exec timing"; got != want {
		t.Fatalf("second line: got message %v, want %q", got, want)
	}
	if timing["level"] != "debug" || timing["exec_id"] != done["exec_id"] {
		t.Errorf("timing line %v: want level debug and the exec_id of the call's line", timing)
	}
	for _, key := range []string{"t_in_mono_ns", "t_out_mono_ns", "sdk_in_us", "check_us", "run_us", "queue_us",
		"warm", "take_us", "create_us", "start_us", "deliver_us", "sandbox_us", "result_us", "sdk_out_us"} {
		if _, ok := timing[key]; !ok {
			t.Errorf("timing line %v: got no %q, want it", timing, key)
		}
	}
	if got, want := timing["sandbox_us"], 7000.0; got != want {
		t.Errorf("timing line sandbox_us: got %v, want %v", got, want)
	}
	if in, out := timing["t_in_mono_ns"].(float64), timing["t_out_mono_ns"].(float64); !(in > 0 && out >= in) {
		t.Errorf("timing line instants: got in %v, out %v, want 0 < in <= out", in, out)
	}
	ids := map[any]bool{}
	for _, l := range lines {
		ids[l["exec_id"]] = true
	}
	if len(ids) != 3 {
		t.Errorf("exec_ids: got %d distinct in %d lines, want one per call", len(ids), len(lines))
	}
}

// TestLogsCarryNoFileData: file names and contents, in and out, and progress
// messages (which quote the program's output) never reach the log.
func TestLogsCarryNoFileData(t *testing.T) {
	canary := "canary-" + rand.Text()
	var buf syncbuf.Buffer
	r := funcRunner(func(_ context.Context, job launcher.Job) (launcher.Result, error) {
		if job.Progress != nil {
			job.Progress(launcher.Progress{Elapsed: time.Second, OutputBytes: 40, Tail: canary + "\n"})
		}
		return launcher.Result{Files: []launcher.OutputFile{
			{Name: canary + ".txt", Size: int64(len(canary)), Data: []byte(canary)},
			{Name: canary + ".bin", Size: 1 << 30, Skipped: "over the cap " + canary},
		}}, nil
	})
	cs := connect(t, t.Context(), r, Options{Logger: zerolog.New(&buf).Level(zerolog.TraceLevel)})
	params := &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(
		`{"code":"x","files":[{"name":"` + canary + `","content":"` + canary + `"}]}`)}
	params.SetProgressToken(canary)
	if res, err := cs.CallTool(t.Context(), params); err != nil || res.IsError {
		t.Fatalf("CallTool: got (%v, %v), want a result", res, err)
	}
	call(t, t.Context(), cs, `{"code":"x","files":[{"name":"../`+canary+`","content":"`+canary+`"}]}`)
	lines := canaryFreeLines(t, buf.String(), canary, 3, "done, its timing (debug), rejected")
	lines = slices.Delete(lines, 1, 2)
	for key, want := range map[string]any{"files_in": 1.0, "files_in_bytes": float64(len(canary)), "files_out": 2.0, "progress": true} {
		if got := lines[0][key]; got != want {
			t.Errorf("done line %s: got %v, want %v", key, got, want)
		}
	}
	if got, want := lines[1]["field"], "files"; got != want {
		t.Errorf("rejected line field: got %v, want %v", got, want)
	}
}

// TestTimingOnlyAtDebug: the per-call timing line is written at debug level and
// below only; at info a call logs its one line, as before.
func TestTimingOnlyAtDebug(t *testing.T) {
	var buf syncbuf.Buffer
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{Logger: zerolog.New(&buf).Level(zerolog.InfoLevel)})
	r.set(launcher.Result{Duration: time.Millisecond}, nil)
	call(t, t.Context(), cs, `{"code":"x"}`)
	lines := logLines(t, buf.String())
	if len(lines) != 1 || lines[0]["message"] != "exec" {
		t.Fatalf("log at info: got %v, want the one exec line", lines)
	}
}
