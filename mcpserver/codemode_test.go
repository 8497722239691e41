package mcpserver

import (
	"os"
	"testing"

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
