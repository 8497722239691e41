package mcpserver

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

var testLanguages = []string{"python", "javascript", "bash"}

// TestLanguageField: with languages configured, exec takes "language" from their enum
// and the job carries it (the schema's default, python, when absent); without, there is no such field (TestListToolsGolden pins
// the tool as it was).
func TestLanguageField(t *testing.T) {
	r := &fakeRunner{}
	var logs syncbuf.Buffer
	cs := connect(t, t.Context(), r, Options{Languages: testLanguages, Logger: zerolog.New(&logs)})
	p, _ := listedProperty(t, cs, toolName, "language")
	if diff := cmp.Diff([]string{"python", "javascript", "bash"}, p.Enum); diff != "" {
		t.Errorf("language enum (-want +got):\n%s", diff)
	}
	if d := description(Options{Languages: testLanguages}.withDefaults(), limitsOf(launcher.Options{})); !strings.Contains(d, "\n\nLanguages: ") || !strings.Contains(d, "bash -e -o pipefail") {
		t.Errorf("description lacks the languages paragraph:\n%s", d)
	}
	for _, args := range []string{`{"code":"echo hi","language":"bash"}`, `{"code":"console.log(1)","language":"javascript"}`, `{"code":"print(1)"}`} {
		if res := call(t, t.Context(), cs, args); res.IsError {
			t.Fatalf("%s: %s", args, text(t, res))
		}
	}
	var got []string
	for _, j := range r.calls() {
		got = append(got, j.Language)
	}
	if diff := cmp.Diff([]string{"bash", "javascript", "python"}, got); diff != "" {
		t.Errorf("jobs' language (-want +got):\n%s", diff)
	}
	// The exec lines name a language other than the default; Python's say nothing.
	var logged []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `"message":"exec"`) {
			_, l, _ := strings.Cut(line, `"language":"`)
			l, _, _ = strings.Cut(l, `"`)
			logged = append(logged, l)
		}
	}
	if diff := cmp.Diff([]string{"bash", "javascript", ""}, logged); diff != "" {
		t.Errorf("exec lines' language (-want +got):\n%s\n%s", diff, logs.String())
	}

	if _, ok := inputSchema(Options{}.withDefaults()).Properties["language"]; ok {
		t.Error("language: a property without languages configured")
	}
	r = &fakeRunner{}
	cs = connect(t, t.Context(), r, Options{})
	expectToolErrors(t, cs, r, []badCall{
		{"language without languages", `{"code":"x","language":"bash"}`, `unexpected additional properties ["language"]`},
	}, "language without languages")
}

// TestLanguageTitle: exec's title and first sentence name the languages configured,
// and say Python alone without them (TestListToolsGolden pins that tool whole).
func TestLanguageTitle(t *testing.T) {
	for _, tt := range []struct {
		langs        []string
		title, first string
	}{
		{nil, "Run Python in a sandbox", "Run a Python 3 program (python3) in a fresh"},
		{[]string{"python"}, "Run Python in a sandbox", "Run a Python 3 program (python3) in a fresh"},
		{testLanguages, "Run Python, JavaScript or bash in a sandbox", `Run a program in Python, JavaScript or bash (Python 3, python3, by default; "language" chooses, see Languages below) in a fresh`},
		{[]string{"python", "bash"}, "Run Python or bash in a sandbox", "Run a program in Python or bash (Python 3"},
	} {
		o := Options{Languages: tt.langs}.withDefaults()
		if got := annotations(o).Title; got != tt.title {
			t.Errorf("%v: title %q, want %q", tt.langs, got, tt.title)
		}
		if d := description(o, runnerLimits{Python: "python3"}); !strings.HasPrefix(d, tt.first) {
			t.Errorf("%v: description starts %q, want %q", tt.langs, d[:120], tt.first)
		}
	}
}

// TestLanguageRefusals: a language that is not configured, and one with what it cannot
// run yet (sessions: Python only; code mode: Python and JavaScript), are tool errors that say what is
// supported, and never reach the runner.
func TestLanguageRefusals(t *testing.T) {
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{Languages: []string{"python", "bash"}, Vars: testVars})
	expectToolErrors(t, cs, r, []badCall{
		{"not configured", `{"code":"x","language":"javascript"}`, "language"},
		{"unknown", `{"code":"x","language":"ruby"}`, "language"},
	}, "bad language")
	if err := checkLanguage(execInput{Language: "javascript"}, Options{Languages: []string{"python", "bash"}, Vars: testVars}); err == nil ||
		!strings.Contains(err.Error(), `it runs "python", "bash"`) || !strings.Contains(err.Error(), "MCP_EXEC_LANGUAGES") {
		t.Errorf("not configured: got %v, want the supported list and the setting", err)
	}
	for _, l := range []string{"bash", "javascript"} {
		if err := checkLanguage(execInput{Language: l, SessionID: "s"}, Options{Languages: testLanguages}); err != nil {
			t.Errorf("%s with session_id: got %v, want it taken", l, err)
		}
	}

	cfg, err := upstream.Parse([]byte(`{"mcpServers": {"echo-server": {"command": "/bin/false", "tools": ["echo"]}}}`),
		upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	r = &fakeRunner{}
	cs = connect(t, t.Context(), r, Options{Languages: testLanguages, Upstreams: upstream.New(cfg, "test", zerolog.Nop())})
	expectToolErrors(t, cs, r, []badCall{
		{"code mode", `{"code":"echo","language":"bash"}`, "runs Python and JavaScript only"},
	}, "a language in code mode")
	if res := call(t, t.Context(), cs, `{"code":"print(1)","language":"python"}`); res.IsError {
		t.Fatalf("python in code mode: %s", text(t, res))
	}
	if res := call(t, t.Context(), cs, `{"code":"console.log(1)","language":"javascript"}`); res.IsError {
		t.Fatalf("javascript in code mode: %s", text(t, res))
	}
	up := Options{Languages: testLanguages, Upstreams: upstream.New(cfg, "test", zerolog.Nop())}
	if err := checkLanguage(execInput{Language: "javascript", SessionID: "s"}, up); err != nil {
		t.Errorf("javascript in a session in code mode: got %v, want it taken", err)
	}
	if err := checkLanguage(execInput{Language: "bash", SessionID: "s"}, up); err == nil || !strings.Contains(err.Error(), "runs Python and JavaScript only") {
		t.Errorf("bash in a session in code mode: got %v, want code mode's refusal", err)
	}
}
