package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// Upstreams gives programs the tools of other MCP servers (code mode).
// *upstream.Manager satisfies it.
type Upstreams interface {
	NewExec(approve upstream.Approver) *upstream.Exec
	// Index and Search give the Python form of the calls, and with javascript the
	// JavaScript form too.
	Index(javascript bool) string
	Search(query string, javascript bool) string
}

// execToolsOutput is the structured result with upstreams configured: execOutput
// and the calls the program made (metadata only).
type execToolsOutput struct {
	execOutput
	// ToolCalls and ToolCallsMore are never nil, so that they are always arrays on
	// the wire.
	ToolCalls     []upstream.CallRecord `json:"tool_calls" jsonschema:"The program's calls to upstream tools, in the order they ended (the first 20): server, tool, duration_ms, status, arg_bytes, result_bytes (never their arguments or results)."`
	ToolCallsMore []upstream.CallGroup  `json:"tool_calls_more" jsonschema:"The calls after the first 20, counted by server, tool and status: count, and duration_ms, arg_bytes and result_bytes summed; last, the calls refused past the budget (server and tool unknown, status budget). Empty when the program made at most 20 calls, all within the budget."`
}

// maxListedCalls bounds the calls tool_calls lists one by one; the rest are counted
// in tool_calls_more, so that what reaches the client does not grow with the number
// of calls of the same tools (the log has a line per call the budget counted).
const maxListedCalls = 20

func toolsOutputSchema(o Options) *jsonschema.Schema {
	s, err := jsonschema.For[execToolsOutput](nil)
	if err != nil {
		panic("mcpserver: inferring output schema: " + err.Error()) // a bug in execToolsOutput
	}
	for _, k := range []string{"files", "tool_calls", "tool_calls_more"} {
		s.Properties[k].Types, s.Properties[k].Type = nil, "array"
	}
	if !sessionsOn(o) {
		delete(s.Properties, "session")
	}
	return s
}

const searchToolName = "tools_search"

type searchInput struct {
	Query string `json:"query" jsonschema:"Text to look for in server names, tool names and descriptions (any case); empty lists every tool."`
}

// addCodeMode adds exec with tool_calls, and tools_search. sessionsNote is the
// description's note on sessions, "" without them: a session's calls get the tools too
// (each call its own budget and approvals, as a one-shot exec).
func (h *handler) addCodeMode(s *mcp.Server, opts Options, sessionsNote string) {
	js := len(jsLanguages(opts)) > 0 // code mode's other languages: their import is one
	mcp.AddTool(s, &mcp.Tool{
		Name:         toolName,
		Description:  description(opts, h.limits) + backgroundNote(opts.Runs) + sessionsNote + "\n\n" + opts.Upstreams.Index(js),
		InputSchema:  inputSchema(opts),
		OutputSchema: backgroundOutputSchema(toolsOutputSchema(opts), opts),
		Annotations:  annotations(opts),
	}, h.execTools)
	mcp.AddTool(s, &mcp.Tool{
		Name:        searchToolName,
		Description: searchDescription(js),
		Annotations: &mcp.ToolAnnotations{Title: "Search the tools available to exec's programs", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in searchInput) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: opts.Upstreams.Search(in.Query, js)}}}, nil, nil
	})
}

// searchDescription is tools_search's description: the forms its answer gives.
func searchDescription(javascript bool) string {
	forms := "the Python signature (from mcptools import <server>; <server>.<tool>(...))"
	if javascript {
		forms = "the Python signature (from mcptools import <server>; <server>.<tool>(...)), the JavaScript call (import { <server> } from \"mcptools\"; await <server>.<tool>({...}))"
	}
	return "Find the upstream tools a program run by exec can call: returns " + forms + " and description of each allowed tool whose server, name or description contains the query. Runs no code."
}

// execTools is exec with the program's tools bound: the job gets the exec's bridge,
// and the result its record of calls.
func (h *handler) execTools(ctx context.Context, req *mcp.CallToolRequest, in execInput) (*mcp.CallToolResult, any, error) {
	if in.Background {
		return h.background(ctx, req, in, func(rctx context.Context, progress func(launcher.Progress)) (*mcp.CallToolResult, any, error) {
			return anyOut(h.runTools(rctx, req, in, progress))
		})
	}
	return anyOut(h.runTools(ctx, req, in, nil))
}

// runTools is execTools' body (progress as for run).
func (h *handler) runTools(ctx context.Context, req *mcp.CallToolRequest, in execInput, progress func(launcher.Progress)) (*mcp.CallToolResult, execToolsOutput, error) {
	x := h.opts.Upstreams.NewExec(elicitApproval(req.Session))
	// The program's calls go on the caller's own upstream sessions.
	ctx = upstream.WithIdentity(ctx, identity(req))
	res, out, err := h.run(ctx, req, in, func(j *launcher.Job) { j.Tools = x.Tools() }, progress)
	calls, refused := x.Calls(), x.Refused()
	h.logCalls(calls, refused)
	listed := calls[:min(len(calls), maxListedCalls)]
	more := upstream.Group(calls[len(listed):])
	if refused.Count > 0 {
		more = append(more, refused)
	}
	return res, execToolsOutput{execOutput: out, ToolCalls: listed, ToolCallsMore: more}, err
}

// logCalls logs a line per call the budget counted (at most limits.max_calls), and
// one for the calls refused past it: their names are the configured ones or unknown,
// never a program's text.
func (h *handler) logCalls(calls []upstream.CallRecord, refused upstream.CallGroup) {
	for _, c := range calls {
		h.log.Info().Str("upstream", c.Server).Str("tool", c.Tool).Str("status", c.Status).
			Int64("duration_ms", c.DurationMS).Int("arg_bytes", c.ArgBytes).Int("result_bytes", c.ResultBytes).
			Msg("tool call")
	}
	if refused.Count > 0 {
		h.log.Info().Str("status", refused.Status).Int("count", refused.Count).Int("arg_bytes", refused.ArgBytes).
			Msg("tool calls refused past the budget")
	}
}

// mrtrProtocol is the first MCP version in which a server may not send a request
// (elicitation/create) while it serves one: it must answer with input requests
// instead (SEP-2322), which would end exec's call while its program runs.
const mrtrProtocol = "2026-07-28"

// elicitApproval asks the client's human, through MCP elicitation, whether a program
// may make one call of a tool on an approve list. A client without the elicitation
// capability cannot be asked: the call is denied (upstream.Unsupported). The question
// shows the call's arguments whole, in the canonical encoding that is sent upstream
// (the caller's own data, going back to the caller); upstream.Exec refuses arguments
// longer than upstream.MaxApprovalArgs before asking. Clients on MCP 2026-07-28 and
// later cannot be asked this way (mrtrProtocol).
func elicitApproval(ss *mcp.ServerSession) upstream.Approver {
	return func(ctx context.Context, server, tool string, args json.RawMessage) (string, error) {
		if ss == nil {
			return upstream.Unsupported, nil
		}
		p := ss.InitializeParams()
		if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
			return upstream.Unsupported, nil
		}
		if p.ProtocolVersion >= mrtrProtocol {
			return upstream.Unsupported, errors.New("the client speaks MCP " + p.ProtocolVersion +
				", where a tool asks its client only through multi round-trip input requests (SEP-2322), which exec does not support yet")
		}
		if len(args) > upstream.MaxApprovalArgs {
			return "", fmt.Errorf("the arguments are %d bytes, more than the prompt shows (%d)", len(args), upstream.MaxApprovalArgs)
		}
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{
			Mode: "form",
			Message: fmt.Sprintf("A program run by mcp-exec wants to call the tool %s.%s, which needs your approval. Arguments: %s\nAccept to let this one call run, with exactly these arguments; decline to refuse it.",
				server, tool, args),
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		})
		if err != nil {
			return "", fmt.Errorf("elicitation: %w", err)
		}
		switch res.Action {
		case "accept":
			return upstream.Accepted, nil
		case "decline":
			return upstream.Declined, nil
		default:
			return upstream.Canceled, nil
		}
	}
}
