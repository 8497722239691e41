package mcpserver

import (
	"os"
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
