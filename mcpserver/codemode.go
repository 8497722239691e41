package mcpserver

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// Upstreams gives programs the tools of other MCP servers (code mode).
// *upstream.Manager satisfies it.
type Upstreams interface {
	NewExec() *upstream.Exec
	Index() string
	Search(query string) string
}

// execToolsOutput is the structured result with upstreams configured: execOutput
// and the calls the program made (metadata only).
type execToolsOutput struct {
	execOutput
	// ToolCalls is never nil, so that it is always an array on the wire.
	ToolCalls []upstream.CallRecord `json:"tool_calls" jsonschema:"The program's calls to upstream tools, in the order they ended: server, tool, duration_ms, status, arg_bytes, result_bytes (never their arguments or results)."`
}

func toolsOutputSchema() *jsonschema.Schema {
	s, err := jsonschema.For[execToolsOutput](nil)
	if err != nil {
		panic("mcpserver: inferring output schema: " + err.Error()) // a bug in execToolsOutput
	}
	for _, k := range []string{"files", "tool_calls"} {
		s.Properties[k].Types, s.Properties[k].Type = nil, "array"
	}
	delete(s.Properties, "session") // no sessions in code mode (sessions.go)
	return s
}

const searchToolName = "tools_search"

type searchInput struct {
	Query string `json:"query" jsonschema:"Text to look for in server names, tool names and descriptions (any case); empty lists every tool."`
}

// addCodeMode adds exec with tool_calls, and tools_search.
func (h *handler) addCodeMode(s *mcp.Server, opts Options) {
	mcp.AddTool(s, &mcp.Tool{
		Name:         toolName,
		Description:  description(opts) + "\n\n" + opts.Upstreams.Index(),
		InputSchema:  inputSchema(opts),
		OutputSchema: toolsOutputSchema(),
		Annotations:  annotations(),
	}, h.execTools)
	mcp.AddTool(s, &mcp.Tool{
		Name:        searchToolName,
		Description: "Find the upstream tools a program run by exec can call: returns the Python signature (from mcptools import <server>; <server>.<tool>(...)) and description of each allowed tool whose server, name or description contains the query. Runs no code.",
		Annotations: &mcp.ToolAnnotations{Title: "Search the tools available to exec's programs", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in searchInput) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: opts.Upstreams.Search(in.Query)}}}, nil, nil
	})
}

// execTools is exec with the program's tools bound: the job gets the exec's bridge,
// and the result its record of calls.
func (h *handler) execTools(ctx context.Context, req *mcp.CallToolRequest, in execInput) (*mcp.CallToolResult, execToolsOutput, error) {
	x := h.opts.Upstreams.NewExec()
	res, out, err := h.run(ctx, req, in, func(j *launcher.Job) { j.Tools = x.Tools() })
	calls := x.Calls()
	h.logCalls(calls)
	return res, execToolsOutput{execOutput: out, ToolCalls: calls}, err
}

func (h *handler) logCalls(calls []upstream.CallRecord) {
	for _, c := range calls {
		h.log.Info().Str("upstream", c.Server).Str("tool", c.Tool).Str("status", c.Status).
			Int64("duration_ms", c.DurationMS).Int("arg_bytes", c.ArgBytes).Int("result_bytes", c.ResultBytes).
			Msg("tool call")
	}
}
