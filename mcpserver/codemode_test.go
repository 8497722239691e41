package mcpserver

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// TestListToolsGoldenUpstreams: with upstreams configured the tool list is exec (its
// description with the index, its result with tool_calls) and tools_search; without,
// TestListToolsGolden's file is unchanged.
func TestListToolsGoldenUpstreams(t *testing.T) {
	cfg, err := upstream.Parse([]byte(`{"mcpServers": {"echo-server": {"command": "/bin/false", "tools": ["echo"]}}}`),
		upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, t.Context(), &fakeRunner{}, Options{Upstreams: upstream.New(cfg, "test", zerolog.Nop())})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "tool-upstreams.golden.json", "tools JSON", res.Tools)
}

// TestCodeModeEgress: with upstreams and egress profiles both configured, code mode's
// exec offers the profiles' enum like plain exec, and a call with a profile reaches the
// runner with both its profile and its tools (the launcher runs it in a sandbox of its
// own with the channel, and the tools over its stream).
func TestCodeModeEgress(t *testing.T) {
	cfg, err := upstream.Parse([]byte(`{"mcpServers": {"echo-server": {"command": "/bin/false", "tools": ["echo"]}}}`),
		upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{Upstreams: upstream.New(cfg, "test", zerolog.Nop()), Egress: testEgress})
	p, _ := listedProperty(t, cs, toolName, "egress")
	if diff := cmp.Diff([]string{"deb", "pypi"}, p.Enum); diff != "" {
		t.Errorf("code mode's exec: egress enum (-want +got):\n%s", diff)
	}
	if res := callNamed(t, cs, toolName, map[string]any{"code": "print(1)", "egress": "deb"}); res.IsError {
		t.Fatalf("code mode's exec with a profile: %s", text(t, res))
	}
	jobs := r.calls()
	if len(jobs) != 1 || jobs[0].Egress != "deb" || jobs[0].Tools == nil {
		t.Fatalf("runner got %+v, want one job with egress deb and the exec's tools", jobs)
	}
}

// TestCodeModeSessions: with upstreams and sessions both configured, the session tools
// are there and exec takes session_id; each call in a session gets tools of its own,
// with its own budget: three calls of three tool calls each, under a budget of two
// calls per exec, each have two counted and one refused, and the session in the result.
func TestCodeModeSessions(t *testing.T) {
	cfg, err := upstream.Parse([]byte(`{"mcpServers": {"echo-server": {"command": "/bin/false", "tools": ["echo"]}}, "limits": {"max_calls": 2}}`),
		upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSessions{toolCalls: 3}
	cs := connect(t, t.Context(), &fakeRunner{}, Options{Upstreams: upstream.New(cfg, "test", zerolog.Nop()), Sessions: sessionOpts(f)})
	if p, _ := listedProperty(t, cs, toolName, "session_id"); p.Description == "" {
		t.Fatal("code mode's exec has no session_id")
	}
	listedProperty(t, cs, toolSessionCreate, "") // fails without the tool
	id := createSession(t, cs).SessionID
	for i := range 3 {
		res := callNamed(t, cs, toolName, map[string]any{"code": "print(1)", "session_id": id})
		if res.IsError {
			t.Fatalf("call %d: %s", i+1, text(t, res))
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var out execToolsOutput
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		if out.Session == nil || out.Session.ExecutionCount != i+1 {
			t.Errorf("call %d: session %+v", i+1, out.Session)
		}
		if len(out.ToolCalls) != 2 || len(out.ToolCallsMore) != 1 || out.ToolCallsMore[0].Count != 1 || out.ToolCallsMore[0].Status != "budget" {
			t.Errorf("call %d: tool_calls %+v, tool_calls_more %+v; want 2 counted and 1 refused past this call's budget", i+1, out.ToolCalls, out.ToolCallsMore)
		}
	}
	jobs := f.conns[0].jobs()
	if len(jobs) != 3 || jobs[0].Tools == nil || jobs[0].Tools == jobs[1].Tools || jobs[1].Tools == jobs[2].Tools {
		t.Fatalf("the session got %d jobs, want 3, each with tools of its own", len(jobs))
	}
}

// TestCodeModeIndexJavaScript: with JavaScript among the languages, exec's index and
// tools_search say how a JavaScript program imports and calls a server's tools
// (launcher/mcptools.mjs); without it, both stay Python's alone.
func TestCodeModeIndexJavaScript(t *testing.T) {
	cfg, err := upstream.Parse([]byte(`{"mcpServers": {"echo-server": {"command": "/bin/false", "tools": ["echo"]}}}`),
		upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	const jsImport = "`import { echo_server } from \"mcptools\"`, then `await echo_server.<tool>({...})`"
	for _, tt := range []struct {
		langs []string
		js    bool
	}{
		{nil, false},
		{[]string{"python", "bash"}, false},
		{[]string{"python", "javascript", "bash"}, true},
	} {
		cs := connect(t, t.Context(), &fakeRunner{}, Options{Upstreams: upstream.New(cfg, "test", zerolog.Nop()), Languages: tt.langs})
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, tool := range res.Tools {
			got[tool.Name] = tool.Description
		}
		if !strings.Contains(got[toolName], "e.g. `from mcptools import echo_server`") {
			t.Errorf("languages %v: exec's index lacks the Python import", tt.langs)
		}
		if strings.Contains(got[toolName], jsImport) != tt.js {
			t.Errorf("languages %v: exec's index has the JavaScript import %v, want %v", tt.langs, !tt.js, tt.js)
		}
		if strings.Contains(got[searchToolName], `import { <server> } from "mcptools"; await <server>.<tool>({...})`) != tt.js {
			t.Errorf("languages %v: tools_search's description has the JavaScript call %v, want %v", tt.langs, !tt.js, tt.js)
		}
	}
}
