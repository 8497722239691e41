package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// Exec is the bridge of one exec: its catalog, its budget, and the record of its
// calls. Its Tools go into the launcher's Job.
type Exec struct {
	m       *Manager
	lim     Limits
	approve Approver
	asking  sync.Mutex // one question to the human at a time
	reading sync.Mutex // one call read at a time: reading allocates about 100 times its size

	mu      sync.Mutex
	calls   int          // counted against limits.max_calls
	results int          // result bytes so far
	records []CallRecord // one per counted call
	refused CallGroup    // the calls past the budget
}

// CallRecord is one call's metadata, for the result and the logs: never its
// arguments or its result.
type CallRecord struct {
	Server      string `json:"server" jsonschema:"The upstream server, as configured; unknown when the call named no configured server."`
	Tool        string `json:"tool" jsonschema:"The tool, as the upstream lists it; unknown when the call named no tool it lists."`
	DurationMS  int64  `json:"duration_ms" jsonschema:"How long the call took, in milliseconds."`
	Status      string `json:"status" jsonschema:"ok, tool_error, denied, declined (a human said no to a tool that needs approval), unapproved (approval could not be asked: the client cannot elicit, or the call cannot be shown whole), budget, too_large, timeout, unavailable, invalid or canceled."`
	Approval    string `json:"approval,omitempty" jsonschema:"For a tool that needs approval: accepted, declined, canceled, unsupported (the client cannot elicit), failed, or not asked: too_large (the arguments do not fit the prompt) or unknown_tool (the upstream lists no such tool)."`
	ArgBytes    int    `json:"arg_bytes" jsonschema:"Size of the call's JSON arguments (canonical, as sent upstream, once read; else the call's size)."`
	ResultBytes int    `json:"result_bytes" jsonschema:"Size of the result's JSON."`
}

// Approver asks the human whether a program may make one call to a tool on the
// server's approve list; ctx has the exec's deadline. It returns the human's answer
// (accepted, declined or canceled), or unsupported when it cannot ask (with an error
// that says why, or nil: the client has no elicitation capability), or an error
// (failed). Only accepted, without an error, lets the call run.
type Approver func(ctx context.Context, server, tool string, arguments json.RawMessage) (string, error)

// The answers of an Approver.
const (
	Accepted    = "accepted"
	Declined    = "declined"
	Canceled    = "canceled"
	Unsupported = "unsupported"
)

// CallGroup counts calls of one tool that ended with one status: metadata only.
type CallGroup struct {
	Server      string `json:"server" jsonschema:"The upstream server."`
	Tool        string `json:"tool" jsonschema:"The tool."`
	Status      string `json:"status" jsonschema:"The calls' status, as in tool_calls."`
	Count       int    `json:"count" jsonschema:"How many calls."`
	DurationMS  int64  `json:"duration_ms" jsonschema:"Their durations, summed, in milliseconds."`
	ArgBytes    int    `json:"arg_bytes" jsonschema:"Their arguments' sizes, summed."`
	ResultBytes int    `json:"result_bytes" jsonschema:"Their results' sizes, summed."`
}

// Group counts records by server, tool and status, in the order each group first
// appears; never nil.
func Group(records []CallRecord) []CallGroup {
	out := []CallGroup{}
	at := map[[3]string]int{}
	for _, r := range records {
		k := [3]string{r.Server, r.Tool, r.Status}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, CallGroup{Server: r.Server, Tool: r.Tool, Status: r.Status})
		}
		g := &out[i]
		g.Count++
		g.DurationMS += r.DurationMS
		g.ArgBytes += r.ArgBytes
		g.ResultBytes += r.ResultBytes
	}
	return out
}

// NewExec starts the bridge of one exec. approve asks about the calls that need
// approval; nil denies them all.
func (m *Manager) NewExec(approve Approver) *Exec {
	return &Exec{m: m, lim: m.cfg.Limits, approve: approve, refused: CallGroup{Server: Unknown, Tool: Unknown, Status: "budget"}}
}

// Tools is the exec's part of the launcher's Job.
func (e *Exec) Tools() *launcher.Tools {
	return &launcher.Tools{Catalog: e.m.catalog(), MaxRequest: e.lim.MaxArgBytes + 4096, Serve: e.serve}
}

// Calls returns the record of the exec's calls so far, in the order they ended: one
// record per call the budget counted (at most limits.max_calls).
func (e *Exec) Calls() []CallRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]CallRecord{}, e.records...)
}

// Refused counts the calls refused past the budget, which are not recorded one by
// one: server and tool unknown (they are not read), status budget. Count is 0 when
// there were none.
func (e *Exec) Refused() CallGroup {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refused
}

// Unknown is what a record says for a server or tool that is not one of the
// configuration's or the upstream's: a program's own text is never recorded.
const Unknown = "unknown"

// maxRecordedName bounds a tool name in a record (an upstream's names can be long;
// the configuration's server names are at most 64 bytes).
const maxRecordedName = 128

// MaxApprovalArgs bounds the arguments of a call that needs approval, in their
// canonical encoding: the human is shown them whole, and a call whose arguments do
// not fit is refused without asking.
const MaxApprovalArgs = 2048

type replyError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// serve answers one call. Every call counts against the budget, whatever becomes of
// it, so that a program cannot make the server do (or record, or log) more than
// limits.max_calls calls' worth; past the budget a call is refused unread.
func (e *Exec) serve(ctx context.Context, body []byte, size int) []byte {
	began := time.Now()
	e.mu.Lock()
	over := e.calls >= e.lim.MaxCalls
	if over {
		e.refused.Count++
		e.refused.ArgBytes += size
	} else {
		e.calls++
	}
	e.mu.Unlock()
	if over {
		reply, _ := fail("budget", "this run has made its %d calls (limits.max_calls in the upstreams file; every call counts, refused ones too)", e.lim.MaxCalls)
		return reply
	}
	rec := CallRecord{Server: Unknown, Tool: Unknown, ArgBytes: size}
	reply, status := e.handle(ctx, body, size, &rec)
	rec.Status, rec.DurationMS = status, time.Since(began).Milliseconds()
	e.mu.Lock()
	e.records = append(e.records, rec)
	e.mu.Unlock()
	return reply
}

func fail(kind, format string, a ...any) ([]byte, string) {
	b, _ := json.Marshal(map[string]replyError{"error": {Kind: kind, Message: fmt.Sprintf(format, a...)}})
	return b, kind
}

func (e *Exec) handle(ctx context.Context, body []byte, size int, rec *CallRecord) ([]byte, string) {
	if body == nil {
		return fail("too_large", "the call is %d bytes; the limit is %d bytes of arguments (limits.max_arg_bytes in the upstreams file)", size, e.lim.MaxArgBytes)
	}
	e.reading.Lock()
	req, err := readCall(body)
	e.reading.Unlock()
	if err != nil {
		return fail("invalid", "the call is refused: %v", err)
	}
	c := e.m.conn(req.server)
	if c == nil {
		return fail("denied", "%s.%s is not an allowed tool: no server %s is configured (the upstreams file lists what programs may call)",
			shortName(req.server), shortName(req.tool), shortQuote(req.server))
	}
	rec.Server = c.srv.Name
	if !c.srv.Allowed(req.tool) {
		return fail("denied", "%s.%s is not an allowed tool (the upstreams file lists what programs may call)", c.srv.Name, shortName(req.tool))
	}
	rec.Tool, rec.ArgBytes = e.recordedTool(c, req.tool), len(req.args)
	if len(req.args) > e.lim.MaxArgBytes {
		return fail("too_large", "the arguments are %d bytes; the limit is %d (limits.max_arg_bytes in the upstreams file)", len(req.args), e.lim.MaxArgBytes)
	}
	if c.srv.NeedsApproval(req.tool) {
		if reply, status, ok := e.ask(ctx, c, req, rec); !ok {
			return reply, status
		}
	}
	cctx, cancel := context.WithTimeout(ctx, e.lim.CallTimeout)
	defer cancel()
	res, err := e.m.call(cctx, c, req.tool, json.RawMessage(req.args))
	name := c.srv.Name + "." + shortName(req.tool)
	switch {
	case err == nil:
	case errors.As(err, new(*ResultTooLargeError)):
		return fail("too_large", "%s: %v", name, err)
	case errors.Is(err, ErrUnavailable):
		return fail("unavailable", "upstream %q is unavailable: %v", c.srv.Name, errors.Unwrap(err))
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fail("canceled", "the run ended")
	case cctx.Err() != nil:
		return fail("timeout", "%s did not answer in time (limits.call_timeout_s is %s, or the run had less left)", name, e.lim.CallTimeout)
	default:
		return fail("tool", "%s: %v", name, err)
	}
	out, err := json.Marshal(map[string]any{"result": res})
	if err != nil {
		return fail("tool", "%s: encoding the result: %v", name, err)
	}
	rec.ResultBytes = len(out)
	e.mu.Lock()
	over := e.results+len(out) > e.lim.MaxResultBytes
	if !over {
		e.results += len(out)
	}
	e.mu.Unlock()
	if over {
		return fail("budget", "the result is %d bytes, more than this run has left of its %d (limits.max_result_bytes in the upstreams file)", len(out), e.lim.MaxResultBytes)
	}
	if res.IsError {
		return out, "tool_error"
	}
	return out, "ok"
}

// recordedTool is the name a record gives an allowed tool: the name the upstream
// lists, or an allowlist entry that is a plain name, else Unknown (the program's
// text matched a glob only), at most maxRecordedName bytes.
func (e *Exec) recordedTool(c *conn, tool string) string {
	name := Unknown
	listed := c.snapshot()
	if i, ok := slices.BinarySearchFunc(listed, tool, func(t *mcp.Tool, s string) int { return strings.Compare(t.Name, s) }); ok {
		name = listed[i].Name
	} else if i := slices.Index(c.srv.Tools, tool); i >= 0 {
		name = c.srv.Tools[i]
	}
	if len(name) > maxRecordedName {
		name = strings.ToValidUTF8(name[:maxRecordedName], "")
	}
	return name
}

// shortName is a program's server or tool name for a message back to it: whole when
// it is short, else its start and its size.
func shortName(s string) string {
	if len(s) <= maxShown {
		return s
	}
	return strings.ToValidUTF8(s[:maxShown], "") + fmt.Sprintf("...(%d bytes)", len(s))
}

// ask puts one call of a tool that needs approval to the human, one question at a
// time; the call runs only on accepted. The human is shown the configured server
// name, the tool's recorded name and the canonical arguments whole, which are what
// goes upstream: a tool the upstream does not list (a glob matched the program's
// text) or arguments that do not fit the prompt are refused without asking. The
// wait counts against the exec's deadline, not the call's timeout.
func (e *Exec) ask(ctx context.Context, c *conn, req call, rec *CallRecord) ([]byte, string, bool) {
	name := c.srv.Name + "." + shortName(req.tool)
	switch {
	case rec.Tool == Unknown:
		rec.Approval = "unknown_tool"
		reply, _ := fail("denied", "%s needs a human's approval, and %s lists no such tool to ask about", name, c.srv.Name)
		return reply, "unapproved", false
	case len(req.args) > MaxApprovalArgs:
		rec.Approval = "too_large"
		reply, _ := fail("denied", "%s needs a human's approval, and its arguments are %d bytes as the human would see them (canonical JSON); "+
			"the approval prompt shows at most %d bytes, whole: pass smaller arguments", name, len(req.args), MaxApprovalArgs)
		return reply, "unapproved", false
	}
	answer, err := Unsupported, error(nil)
	if e.approve != nil {
		e.asking.Lock()
		answer, err = e.approve(ctx, c.srv.Name, rec.Tool, json.RawMessage(req.args))
		e.asking.Unlock()
	}
	switch answer {
	case Accepted, Declined, Canceled:
		if err != nil {
			answer = "failed"
		}
	case Unsupported:
	default:
		if err == nil {
			err = fmt.Errorf("unexpected answer %q", answer)
		}
		answer = "failed"
	}
	rec.Approval = answer
	var reply []byte
	switch {
	case answer == Accepted:
		return nil, "", true
	case ctx.Err() != nil:
		reply, _ = fail("canceled", "the run ended while %s waited for approval", name)
		return reply, "canceled", false
	case answer == Declined || answer == Canceled:
		reply, _ = fail("denied", "%s needs a human's approval, and the human %s the call", name, answer)
		return reply, "declined", false
	case answer == Unsupported && err != nil:
		reply, _ = fail("denied", "%s needs a human's approval, and the client cannot be asked: %v", name, err)
	case answer == Unsupported:
		reply, _ = fail("denied", "%s needs a human's approval, and the client cannot ask for it (it has no MCP elicitation capability)", name)
	default:
		reply, _ = fail("denied", "%s needs a human's approval, and asking for it failed: %v", name, err)
	}
	return reply, "unapproved", false
}
