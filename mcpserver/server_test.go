package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// jobOpts compare launcher.Jobs by what the runner is asked to do: not their progress
// callback, nor their audit label (a random exec_id: TestAuditLabels checks it).
var jobOpts = []cmp.Option{cmpopts.IgnoreFields(launcher.Job{}, "Progress", "Audit"), cmpopts.IgnoreUnexported(launcher.Job{}), cmpopts.EquateEmpty()}

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output")

// fakeRunner records the jobs it is given and answers with a fixed result.
type fakeRunner struct {
	mu   sync.Mutex
	jobs []launcher.Job
	res  launcher.Result
	err  error
	opts launcher.Options // what Options says; zero: the launcher's defaults
}

func (f *fakeRunner) Options() launcher.Options { return f.opts }

func (f *fakeRunner) Run(_ context.Context, job launcher.Job) (launcher.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = append(f.jobs, job)
	return f.res, f.err
}

func (f *fakeRunner) calls() []launcher.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.jobs)
}

func (f *fakeRunner) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = nil
}

func (f *fakeRunner) set(res launcher.Result, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res, f.err, f.jobs = res, err, nil
}

// connect serves New(r, opts) over in-memory transports and returns a
// connected client session, closed when the test ends.
func connect(tb testing.TB, ctx context.Context, r Runner, opts Options) *mcp.ClientSession {
	tb.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(r, opts).Connect(ctx, st, nil)
	if err != nil {
		tb.Fatalf("server connect: got error %v, want nil", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatalf("client connect: got error %v, want nil", err)
	}
	tb.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// call calls exec with raw JSON arguments, so tests can send exactly the
// bytes a model might (1.5, "10", 1e12) rather than what Go would marshal.
func call(tb testing.TB, ctx context.Context, cs *mcp.ClientSession, args string) *mcp.CallToolResult {
	tb.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(args)})
	if err != nil {
		tb.Fatalf("CallTool(%s): got protocol error %v, want a result", args, err)
	}
	return res
}

// badCall is a call the tool must refuse: a tool error whose text contains want.
type badCall struct {
	name string
	args string
	want string // substring of the error text
}

// expectToolErrors makes each call and checks that it is a tool error naming the
// problem, and that none of them reached the runner.
func expectToolErrors(t *testing.T, cs *mcp.ClientSession, r *fakeRunner, tests []badCall, what string) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, t.Context(), cs, tt.args)
			got := text(t, res)
			t.Logf("error text: %s", got)
			if !res.IsError {
				t.Errorf("isError: got false, want true")
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("error text: got %q, want it to contain %q", got, tt.want)
			}
		})
	}
	if jobs := r.calls(); len(jobs) != 0 {
		t.Fatalf("runner calls after %s: got %d, want 0", what, len(jobs))
	}
}

func text(tb testing.TB, res *mcp.CallToolResult) string {
	tb.Helper()
	if len(res.Content) != 1 {
		tb.Fatalf("content: got %d blocks, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		tb.Fatalf("content[0]: got %T, want *mcp.TextContent", res.Content[0])
	}
	return tc.Text
}

// structured decodes structuredContent strictly: every field present, none extra.
func structured(t *testing.T, res *mcp.CallToolResult) execOutput {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("marshal structuredContent: %v", err)
	}
	var keys map[string]any
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatalf("structuredContent %s: got %v, want a JSON object", raw, err)
	}
	want := []string{"duration_ms", "exit_code", "files", "oom_killed", "stderr", "stdout", "timed_out", "truncated"}
	if diff := cmp.Diff(want, slices.Sorted(maps.Keys(keys))); diff != "" {
		t.Errorf("structuredContent keys (-want +got):\n%s", diff)
	}
	if files, ok := keys["files"].([]any); !ok || files == nil {
		t.Errorf("structuredContent files: got %v, want an array", keys["files"])
	}
	var out execOutput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decode structuredContent %s: %v", raw, err)
	}
	return out
}

// TestCapabilities: the server advertises tools without listChanged (its one tool is
// fixed), and nothing it does not have (no logging: it sends no log messages).
func TestCapabilities(t *testing.T) {
	cs := connect(t, t.Context(), &fakeRunner{}, Options{})
	got := cs.InitializeResult().Capabilities
	want := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	if got.Tools == nil || got.Tools.ListChanged {
		t.Errorf("tools capability: got %+v, want present with listChanged false", got.Tools)
	}
}

// TestDescriptionAsksRunner: the caps the runner holds a result to, and its
// interpreter, come from the runner itself (Runner.Options), not from a copy.
func TestDescriptionAsksRunner(t *testing.T) {
	r := &fakeRunner{opts: launcher.Options{Python: "python3.12", MaxOutputBytes: 64 << 10, MaxFileBytes: 100, MaxFilesBytes: 4 << 10}}
	cs := connect(t, t.Context(), r, Options{})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools: got error %v, want nil", err)
	}
	d := res.Tools[0].Description
	for _, want := range []string{"(python3.12)", "capped at 64 KiB", "come back up to 100 bytes each and 4 KiB together"} {
		if !strings.Contains(d, want) {
			t.Errorf("description: got %q, want it to contain %q", d, want)
		}
	}
}

func TestListToolsGolden(t *testing.T) {
	cs := connect(t, t.Context(), &fakeRunner{}, Options{})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools: got error %v, want nil", err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != "exec" {
		names := []string{}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		t.Fatalf("tools: got %q, want [\"exec\"]", names)
	}
	checkGolden(t, "tool.golden.json", "tool JSON", res.Tools[0])
}

// checkGolden compares v, as indented JSON, with testdata/name (what names it in the
// failure); with -update it writes the file first.
func checkGolden(t *testing.T, name, what string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got), run with -update if intended:\n%s", what, diff)
	}
}

// TestInputSchema pins the schema properties that validation relies on.
func TestInputSchema(t *testing.T) {
	s := inputSchema(Options{}.withDefaults())
	if got := s.Properties["timeout_s"].Type; got != "integer" {
		t.Errorf("timeout_s type: got %q, want \"integer\"", got)
	}
	if got := s.Properties["timeout_s"].Types; got != nil {
		t.Errorf("timeout_s types: got %q, want nil", got)
	}
	if diff := cmp.Diff([]string{"code"}, s.Required); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	if ap := s.AdditionalProperties; ap == nil || ap.Not == nil {
		t.Errorf("additionalProperties: got %v, want false", ap)
	}
	files := s.Properties["files"]
	if files.Type != "array" || files.Types != nil {
		t.Errorf("files type: got %q %q, want \"array\"", files.Type, files.Types)
	}
	if diff := cmp.Diff([]string{"name", "content"}, files.Items.Required); diff != "" {
		t.Errorf("files items required (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"utf-8", "base64"}, files.Items.Properties["encoding"].Enum); diff != "" {
		t.Errorf("files encoding enum (-want +got):\n%s", diff)
	}
	if ap := files.Items.AdditionalProperties; ap == nil || ap.Not == nil {
		t.Errorf("files items additionalProperties: got %v, want false", ap)
	}
	out := outputSchema()
	if got := out.Properties["files"]; got.Type != "array" || got.Types != nil {
		t.Errorf("output files type: got %q %q, want \"array\"", got.Type, got.Types)
	}
	if !slices.Contains(out.Required, "files") {
		t.Errorf("output required: got %q, want it to include files", out.Required)
	}
}

func TestCallValid(t *testing.T) {
	const defaultT, maxT = 30 * time.Second, 300 * time.Second
	tests := []struct {
		name    string
		args    string
		res     launcher.Result
		wantJob launcher.Job
		want    execOutput
		text    string
	}{{
		name:    "defaults",
		args:    `{"code":"print(1)"}`,
		res:     launcher.Result{Stdout: "1\n", Duration: 123 * time.Millisecond},
		wantJob: launcher.Job{Code: "print(1)", Timeout: defaultT},
		want:    execOutput{Stdout: "1\n", DurationMS: 123},
		text:    "exit_code: 0 (duration 123 ms)\n--- stdout ---\n1\n--- stderr (empty) ---",
	}, {
		name:    "stdin and timeout passed through",
		args:    `{"code":"import sys\nprint(sys.stdin.read())","stdin":"héllo\u0000","timeout_s":5}`,
		res:     launcher.Result{Stdout: "héllo", Stderr: "warn", Duration: time.Second},
		wantJob: launcher.Job{Code: "import sys\nprint(sys.stdin.read())", Stdin: "héllo\x00", Timeout: 5 * time.Second},
		want:    execOutput{Stdout: "héllo", Stderr: "warn", DurationMS: 1000},
		text:    "exit_code: 0 (duration 1000 ms)\n--- stdout ---\nhéllo\n--- stderr ---\nwarn",
	}, {
		name:    "timeout at max",
		args:    `{"code":"x","timeout_s":300}`,
		wantJob: launcher.Job{Code: "x", Timeout: maxT},
		text:    "exit_code: 0 (duration 0 ms)\n--- stdout (empty) ---\n--- stderr (empty) ---",
	}, {
		name:    "timeout over max is capped",
		args:    `{"code":"x","timeout_s":301}`,
		wantJob: launcher.Job{Code: "x", Timeout: maxT},
		text:    "exit_code: 0 (duration 0 ms)\n--- stdout (empty) ---\n--- stderr (empty) ---",
	}, {
		name:    "huge timeout is capped, not overflowed",
		args:    `{"code":"x","timeout_s":1e12}`,
		wantJob: launcher.Job{Code: "x", Timeout: maxT},
		text:    "exit_code: 0 (duration 0 ms)\n--- stdout (empty) ---\n--- stderr (empty) ---",
	}, {
		name:    "timeout beyond int64 is capped",
		args:    `{"code":"x","timeout_s":1e300}`,
		wantJob: launcher.Job{Code: "x", Timeout: maxT},
		text:    "exit_code: 0 (duration 0 ms)\n--- stdout (empty) ---\n--- stderr (empty) ---",
	}, {
		name:    "whole-valued float timeout is accepted",
		args:    `{"code":"x","timeout_s":10.0}`,
		wantJob: launcher.Job{Code: "x", Timeout: 10 * time.Second},
		text:    "exit_code: 0 (duration 0 ms)\n--- stdout (empty) ---\n--- stderr (empty) ---",
	}, {
		name:    "NUL in code is the program's business",
		args:    `{"code":"print(1)\u0000"}`,
		wantJob: launcher.Job{Code: "print(1)\x00", Timeout: defaultT},
		text:    "exit_code: 0 (duration 0 ms)\n--- stdout (empty) ---\n--- stderr (empty) ---",
	}, {
		name:    "non-zero exit is a normal result",
		args:    `{"code":"raise SystemExit(3)"}`,
		res:     launcher.Result{Stderr: "boom\n", ExitCode: 3, Duration: 40 * time.Millisecond},
		wantJob: launcher.Job{Code: "raise SystemExit(3)", Timeout: defaultT},
		want:    execOutput{Stderr: "boom\n", ExitCode: 3, DurationMS: 40},
		text:    "exit_code: 3 (duration 40 ms)\n--- stdout (empty) ---\n--- stderr ---\nboom",
	}, {
		name: "timed out, truncated and oom are normal results",
		args: `{"code":"while True: print(1)","timeout_s":2}`,
		res: launcher.Result{Stdout: "1\n1", ExitCode: 137, Signal: 9, Duration: 2 * time.Second,
			Truncated: true, TimedOut: true, OOMKilled: true},
		wantJob: launcher.Job{Code: "while True: print(1)", Timeout: 2 * time.Second},
		want:    execOutput{Stdout: "1\n1", ExitCode: 137, DurationMS: 2000, Truncated: true, TimedOut: true, OOMKilled: true},
		text: "exit_code: 137 (duration 2000 ms)\n" +
			"timed_out: true (killed at the 2 s limit)\n" +
			"oom_killed: true (killed for running out of memory)\n" +
			"truncated: true (stdout and stderr together exceeded 1 MiB; the rest was dropped)\n" +
			"--- stdout ---\n1\n1\n--- stderr (empty) ---",
	}}
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.set(tt.res, nil)
			res := call(t, t.Context(), cs, tt.args)
			if res.IsError {
				t.Fatalf("isError: got true (%q), want false", text(t, res))
			}
			if diff := cmp.Diff([]launcher.Job{tt.wantJob}, r.calls(), jobOpts...); diff != "" {
				t.Errorf("jobs run (-want +got):\n%s", diff)
			}
			if job := r.calls()[0]; job.Progress != nil {
				t.Errorf("job.Progress: got a func, want nil without a progress token")
			}
			if diff := cmp.Diff(tt.want, structured(t, res), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("structuredContent (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.text, text(t, res)); diff != "" {
				t.Errorf("text content (-want +got):\n%s", diff)
			}
		})
	}
}

// testVars spells settings as cmd/mcp-exec's table does: MCP_EXEC_ and the flag.
func testVars(s backend.Setting) string {
	return "MCP_EXEC_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

func TestCallInvalid(t *testing.T) {
	opts := Options{MaxCodeBytes: 100, MaxStdinBytes: 50, Vars: testVars}
	tests := []badCall{
		{"no arguments", `{}`, `missing properties: ["code"]`},
		{"missing code", `{"stdin":"x"}`, `missing properties: ["code"]`},
		{"empty code", `{"code":""}`, `code is empty: send the program to run in "code"`},
		{"whitespace code", `{"code":" \n\t "}`, `code is empty: send the program to run in "code"`},
		{"code over limit", `{"code":"` + strings.Repeat("x", 101) + `"}`,
			"code is 101 bytes; the limit is 100 bytes (MCP_EXEC_MAX_CODE_BYTES)"},
		{"stdin over limit", `{"code":"x","stdin":"` + strings.Repeat("y", 51) + `"}`,
			"stdin is 51 bytes; the limit is 50 bytes (MCP_EXEC_MAX_STDIN_BYTES)"},
		{"timeout -1", `{"code":"x","timeout_s":-1}`,
			"timeout_s is -1; it must be a whole number of seconds from 1 to 300 (absent means 30)"},
		{"timeout 0", `{"code":"x","timeout_s":0}`,
			"timeout_s is 0; it must be a whole number of seconds from 1 to 300 (absent means 30)"},
		{"timeout hugely negative", `{"code":"x","timeout_s":-1e300}`,
			"timeout_s is -9223372036854775808; it must be a whole number of seconds from 1 to 300"},
		{"timeout fractional", `{"code":"x","timeout_s":1.5}`, "timeout_s"},
		{"timeout string", `{"code":"x","timeout_s":"10"}`, "timeout_s"},
		{"timeout null", `{"code":"x","timeout_s":null}`, "timeout_s"},
		{"unknown argument", `{"code":"x","cmd":"ls"}`, `unexpected additional properties ["cmd"]`},
		{"code wrong type", `{"code":123}`, "code"},
	}
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, opts)
	expectToolErrors(t, cs, r, tests, "bad input")
	if res := call(t, t.Context(), cs, `{"code":"print(1)"}`); res.IsError {
		t.Errorf("good call after bad ones: got isError true (%q), want false", text(t, res))
	}
}

func TestRunnerError(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		want    string
		notWant string
	}{
		{"engine down", launcher.ErrEngineUnavailable, "sandbox unavailable: container engine unreachable", ""},
		{"image missing", launcher.ErrImageMissing, "sandbox unavailable: sandbox image missing", ""},
		{"canceled is passed through", context.Canceled, "context canceled", "sandbox unavailable"},
		{"busy says try again", fmt.Errorf("%w (4 running, 64 queued)", launcher.ErrBusy), "busy: every sandbox slot is taken and the queue is full, try again", "sandbox unavailable"},
		{"shutting down", launcher.ErrClosed, "the server is shutting down", "sandbox unavailable"},
	}
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.set(launcher.Result{}, tt.err)
			res := call(t, t.Context(), cs, `{"code":"print(1)"}`)
			got := text(t, res)
			if !res.IsError {
				t.Errorf("isError: got false, want true")
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("error text: got %q, want it to contain %q", got, tt.want)
			}
			if tt.notWant != "" && strings.Contains(got, tt.notWant) {
				t.Errorf("error text: got %q, want it not to contain %q", got, tt.notWant)
			}
		})
	}
	r.set(launcher.Result{Stdout: "ok"}, nil)
	if res := call(t, t.Context(), cs, `{"code":"print(1)"}`); res.IsError {
		t.Errorf("call after runner errors: got isError true (%q), want false", text(t, res))
	}
}

func BenchmarkCallFakeRunner(b *testing.B) {
	r := &fakeRunner{res: launcher.Result{Stdout: "hello\n", Duration: time.Millisecond}}
	cs := connect(b, b.Context(), r, Options{})
	params := &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(`{"code":"print('hello')"}`)}
	for b.Loop() {
		res, err := cs.CallTool(b.Context(), params)
		if err != nil || res.IsError {
			b.Fatalf("CallTool: got (%v, %v), want a successful result", res, err)
		}
		r.reset() // keep the recorded jobs from growing
	}
}

// TestStructuredIsTheToolResult: Structured gives exactly what a tools/call returns as
// structuredContent, files included, so `mcp-exec run --json` prints the tool's type.
func TestStructuredIsTheToolResult(t *testing.T) {
	r := &fakeRunner{}
	r.set(launcher.Result{
		Stdout: "out\n", Stderr: "err\n", ExitCode: 3, Duration: 1234 * time.Millisecond, Truncated: true, OOMKilled: true,
		Files: []launcher.OutputFile{
			{Name: "a.txt", Size: 2, Data: []byte("hi")},
			{Name: "big.bin", Size: 1 << 30, Skipped: "over the cap"},
		},
	}, nil)
	cs := connect(t, t.Context(), r, Options{})
	res := call(t, t.Context(), cs, `{"code":"pass"}`)
	got, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(Structured(r.res))
	if err != nil {
		t.Fatal(err)
	}
	var gotV, wantV any
	if err := json.Unmarshal(got, &gotV); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &wantV); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("structuredContent vs Structured (-Structured +tool):\n%s", diff)
	}
	if !strings.Contains(string(want), `"files":[{"name":"a.txt"`) {
		t.Errorf("Structured: got %s, want the files listed", want)
	}
}
