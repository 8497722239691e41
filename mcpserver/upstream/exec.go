package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// Exec is the bridge of one exec: its catalog, its budget, and the record of its
// calls. Its Tools go into the launcher's Job.
type Exec struct {
	m       *Manager
	lim     Limits
	approve Approver
	asking  sync.Mutex // one question to the human at a time

	mu      sync.Mutex
	calls   int
	results int // result bytes so far
	records []CallRecord
}

// CallRecord is one call's metadata, for the result and the logs: never its
// arguments or its result.
type CallRecord struct {
	Server      string `json:"server" jsonschema:"The upstream server."`
	Tool        string `json:"tool" jsonschema:"The tool."`
	DurationMS  int64  `json:"duration_ms" jsonschema:"How long the call took, in milliseconds."`
	Status      string `json:"status" jsonschema:"ok, tool_error, denied, declined (a human said no to a tool that needs approval), unapproved (approval could not be asked: the client cannot elicit), budget, too_large, timeout, unavailable, invalid or canceled."`
	Approval    string `json:"approval,omitempty" jsonschema:"For a tool that needs approval: accepted, declined, canceled or unsupported (the client cannot elicit), or failed."`
	ArgBytes    int    `json:"arg_bytes" jsonschema:"Size of the call's JSON arguments."`
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
	return &Exec{m: m, lim: m.cfg.Limits, approve: approve}
}

// Tools is the exec's part of the launcher's Job.
func (e *Exec) Tools() *launcher.Tools {
	return &launcher.Tools{Catalog: e.m.catalog(), MaxRequest: e.lim.MaxArgBytes + 4096, Serve: e.serve}
}

// Calls returns the record of the exec's calls so far, in the order they ended.
func (e *Exec) Calls() []CallRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]CallRecord{}, e.records...)
}

type request struct {
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

type replyError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *Exec) serve(ctx context.Context, body []byte, size int) []byte {
	began := time.Now()
	rec := CallRecord{ArgBytes: size}
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
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return fail("invalid", "the call is not valid JSON")
	}
	rec.Server, rec.Tool, rec.ArgBytes = req.Server, req.Tool, len(req.Arguments)
	if len(req.Arguments) > e.lim.MaxArgBytes {
		return fail("too_large", "the arguments are %d bytes; the limit is %d (limits.max_arg_bytes in the upstreams file)", len(req.Arguments), e.lim.MaxArgBytes)
	}
	c := e.m.conn(req.Server)
	if c == nil || !c.srv.Allowed(req.Tool) {
		return fail("denied", "%s.%s is not an allowed tool (the upstreams file lists what programs may call)", req.Server, req.Tool)
	}
	e.mu.Lock()
	over := e.calls >= e.lim.MaxCalls
	if !over {
		e.calls++
	}
	e.mu.Unlock()
	if over {
		return fail("budget", "this run has made its %d calls (limits.max_calls in the upstreams file)", e.lim.MaxCalls)
	}
	if c.srv.NeedsApproval(req.Tool) {
		if reply, status, ok := e.ask(ctx, req, rec); !ok {
			return reply, status
		}
	}
	var args any = map[string]any{}
	if len(req.Arguments) > 0 && string(req.Arguments) != "null" {
		args = req.Arguments
	}
	cctx, cancel := context.WithTimeout(ctx, e.lim.CallTimeout)
	defer cancel()
	res, err := e.m.call(cctx, c, req.Tool, args)
	switch {
	case err == nil:
	case errors.As(err, new(*ResultTooLargeError)):
		return fail("too_large", "%s.%s: %v", req.Server, req.Tool, err)
	case errors.Is(err, ErrUnavailable):
		return fail("unavailable", "upstream %q is unavailable: %v", req.Server, errors.Unwrap(err))
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fail("canceled", "the run ended")
	case cctx.Err() != nil:
		return fail("timeout", "%s.%s did not answer in time (limits.call_timeout_s is %s, or the run had less left)", req.Server, req.Tool, e.lim.CallTimeout)
	default:
		return fail("tool", "%s.%s: %v", req.Server, req.Tool, err)
	}
	out, err := json.Marshal(map[string]any{"result": res})
	if err != nil {
		return fail("tool", "%s.%s: encoding the result: %v", req.Server, req.Tool, err)
	}
	rec.ResultBytes = len(out)
	e.mu.Lock()
	over = e.results+len(out) > e.lim.MaxResultBytes
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

// ask puts one call of a tool that needs approval to the human, one question at a
// time; the call runs only on accepted. The wait counts against the exec's deadline,
// not the call's timeout.
func (e *Exec) ask(ctx context.Context, req request, rec *CallRecord) ([]byte, string, bool) {
	answer, err := Unsupported, error(nil)
	if e.approve != nil {
		e.asking.Lock()
		answer, err = e.approve(ctx, req.Server, req.Tool, req.Arguments)
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
		reply, _ = fail("canceled", "the run ended while %s.%s waited for approval", req.Server, req.Tool)
		return reply, "canceled", false
	case answer == Declined || answer == Canceled:
		reply, _ = fail("denied", "%s.%s needs a human's approval, and the human %s the call", req.Server, req.Tool, answer)
		return reply, "declined", false
	case answer == Unsupported && err != nil:
		reply, _ = fail("denied", "%s.%s needs a human's approval, and the client cannot be asked: %v", req.Server, req.Tool, err)
	case answer == Unsupported:
		reply, _ = fail("denied", "%s.%s needs a human's approval, and the client cannot ask for it (it has no MCP elicitation capability)", req.Server, req.Tool)
	default:
		reply, _ = fail("denied", "%s.%s needs a human's approval, and asking for it failed: %v", req.Server, req.Tool, err)
	}
	return reply, "unapproved", false
}
