package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// MCP tasks: background runs (runs.go) seen through the task methods, in both forms:
// the experimental tasks of 2025-11-25 (the client asks with params.task; tasks/get,
// tasks/result, tasks/list, tasks/cancel) and the 2026-07-28 extension
// io.modelcontextprotocol/tasks (the client declares it on each request; the server
// answers a call that has not ended within a poll interval with a task; tasks/get
// carries the result inline). A task is a run and its taskId the run_id: no state of
// its own, the same identity binding, limits and TTL as run_wait. go-sdk v1.8.0 has no
// tasks, so they are served from middleware and custom methods, and params.task,
// which the SDK drops, is lifted into _meta below it (LiftTask). When go-sdk gains
// tasks this file goes. Design and sources: docs/design/tasks.md.

const (
	extTasks    = "io.modelcontextprotocol/tasks"
	metaRelated = "io.modelcontextprotocol/related-task"
	// metaTask is where LiftTask puts a 2025-11-25 call's params.task.
	metaTask = "mcp-exec/task"
	// modernRevision is the first revision whose tasks are the extension.
	modernRevision = "2026-07-28"
	// taskPoll is the poll interval a task advertises, and how long a 2026-07-28 call
	// waits for its run before answering with a task.
	taskPoll = time.Second
)

// LiftTask moves a tools/call request's params.task into params._meta["mcp-exec/task"],
// where the SDK keeps it (it drops unknown params). Other messages are returned as
// they are.
func LiftTask(m jsonrpc.Message) jsonrpc.Message {
	req, ok := m.(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" || !bytes.Contains(req.Params, taskKey) {
		return m
	}
	p, ok := spliceTask(nil, req.Params)
	if !ok {
		return m
	}
	out := *req
	out.Params = p
	return &out
}

// LiftTaskTransport is t with LiftTask applied to what it reads (stdio).
func LiftTaskTransport(t mcp.Transport) mcp.Transport { return liftTransport{t} }

type liftTransport struct{ mcp.Transport }

func (t liftTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return liftConn{c}, nil
}

type liftConn struct{ mcp.Connection }

func (c liftConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err != nil {
		return m, err
	}
	return LiftTask(m), nil
}

// LiftTaskHandler is next with LiftTask applied to a POSTed message (streamable
// HTTP). It reads the body next would read; put it behind the body limit.
func LiftTaskHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b, err := readBody(r)
		r.Body.Close()
		if err != nil {
			// The SDK answers the read's error (413 for *http.MaxBytesError).
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
			next.ServeHTTP(w, r)
			return
		}
		b, _ = liftBody(b)
		r.Body, r.ContentLength = &dropReader{b}, int64(len(b))
		next.ServeHTTP(w, r)
	})
}

// readBody reads r's body into one buffer of its stated length where it has one (the
// body limit in front has refused one over the limit), so that a large body is not
// copied again and again as io.ReadAll's buffer grows.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	var buf bytes.Buffer
	buf.Grow(int(r.ContentLength) + bytes.MinRead)
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// dropReader reads b once and lets it go at its end, so that the body's copy here is
// garbage once the SDK has read its own (a call at the request limit is tens of MB).
type dropReader struct{ b []byte }

func (d *dropReader) Read(p []byte) (int, error) {
	if len(d.b) == 0 {
		d.b = nil
		return 0, io.EOF
	}
	n := copy(p, d.b)
	if d.b = d.b[n:]; len(d.b) == 0 {
		d.b = nil
	}
	return n, nil
}

func (d *dropReader) Close() error { d.b = nil; return nil }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// task is a task as both forms state it; the 2026-07-28 one renames ttl and
// pollInterval (taskV2).
type task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

type taskV2 struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *jsonrpc.Error  `json:"error,omitempty"`
}

type createTaskResult struct {
	mcp.ResultBase
	Task task `json:"task"`
}

type taskResult struct {
	mcp.ResultBase
	task
}

type taskV2Result struct {
	mcp.ResultBase
	taskV2
}

type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

type listTasksResult struct {
	mcp.ResultBase
	Tasks      []task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}

type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
	Cursor string `json:"cursor,omitempty"`
}

// status is ru's task status; isErrorFailed, the 2025-11-25 rule, makes a tool error
// "failed" (2026-07-28 keeps failed for JSON-RPC errors).
func (r *runs) status(ru *run, isErrorFailed bool) (status, msg string) {
	select {
	case <-ru.done:
	default:
		msg = fmt.Sprintf("running %d s", int64(r.now().Sub(ru.started)/time.Second))
		if p := ru.progress.Load(); p != nil {
			msg += fmt.Sprintf("; %d bytes of output so far", p.OutputBytes)
		}
		return "working", msg
	}
	switch {
	case ru.canceled.Load():
		return "cancelled", "cancelled"
	case ru.err != nil:
		return "failed", ru.err.Error()
	case ru.res != nil && ru.res.IsError && isErrorFailed:
		return "failed", "the call failed: tasks/result gives its tool error"
	}
	return "completed", ""
}

func (r *runs) task(ru *run) task {
	st, msg := r.status(ru, true)
	created, updated := ru.started, ru.started
	select {
	case <-ru.done:
		updated = ru.ended
	default:
	}
	return task{TaskID: ru.id, Status: st, StatusMessage: msg,
		CreatedAt: created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: updated.UTC().Format(time.RFC3339Nano),
		TTL: r.expiresAt(ru).Sub(created).Milliseconds(), PollInterval: taskPoll.Milliseconds()}
}

func (r *runs) taskV2(ru *run) taskV2 {
	t := r.task(ru)
	st, msg := r.status(ru, false)
	v := taskV2{ResultType: "task", TaskID: t.TaskID, Status: st, StatusMessage: msg, CreatedAt: t.CreatedAt,
		LastUpdatedAt: t.LastUpdatedAt, TTLMs: t.TTL, PollIntervalMs: t.PollInterval}
	return v
}

// final is what the call would have returned had it not been a task: a run that could
// not run is the tool error exec's foreground call answers.
func final(ru *run) *mcp.CallToolResult {
	if ru.err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: ru.err.Error()}}}
	}
	res := *ru.res
	if ru.out != nil {
		res.StructuredContent = ru.out
	}
	return &res
}

// detailed is ru as 2026-07-28's tasks/get answers it: the result inline once
// completed, the error once failed.
func (r *runs) detailed(ru *run) (*taskV2Result, error) {
	v := r.taskV2(ru)
	v.ResultType = "complete"
	switch v.Status {
	case "completed":
		b, err := json.Marshal(final(ru))
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		// The SDK marks only results it sends itself; an inline one needs it too.
		m["resultType"] = "complete"
		v.Result, _ = json.Marshal(m)
	case "failed":
		v.Error = &jsonrpc.Error{Code: -32603, Message: v.StatusMessage}
	}
	return &taskV2Result{taskV2: v}, nil
}

// modern reports whether a request's _meta is of 2026-07-28 or later, and whether it
// declares the tasks extension.
func modern(meta mcp.Meta) (isModern, declared bool) {
	v, _ := meta[mcp.MetaKeyProtocolVersion].(string)
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, declared = ext[extTasks]
	return v >= modernRevision || declared, declared
}

type ownerKey struct{}

// owner is the identity the tasks middleware put in ctx.
func owner(ctx context.Context) string { s, _ := ctx.Value(ownerKey{}).(string); return s }

func invalidParams(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
}

func needCapability() error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
		Message: "tasks need the " + extTasks + " extension declared in the request's _meta client capabilities", Data: data}
}

func methodNotFound(m string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method " + m + " is not served on this protocol revision"}
}

// addTasks serves tasks on s: the capabilities, exec's task support, task-augmented
// calls of exec, and the task methods. Called after every other middleware, so that
// its identity step runs first.
func (h *handler) addTasks(s *mcp.Server) {
	r := h.runs
	must := func(err error) {
		if err != nil {
			panic("mcpserver: " + err.Error()) // only a standard method's name
		}
	}
	must(mcp.AddReceivingCustomMethod(s, "tasks/get", func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
		isModern, declared := modern(p.Meta)
		if isModern && !declared {
			return nil, needCapability()
		}
		ru, err := r.get(ctx, p.TaskID, owner(ctx))
		if err != nil {
			return nil, invalidParams(err)
		}
		if isModern {
			return r.detailed(ru)
		}
		return &taskResult{task: r.task(ru)}, nil
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/result", func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*mcp.CallToolResult, error) {
		if isModern, _ := modern(p.Meta); isModern {
			return nil, methodNotFound("tasks/result")
		}
		for {
			ru, done, err := r.wait(ctx, p.TaskID, owner(ctx), maxRunWait)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				return nil, invalidParams(err)
			}
			if done {
				res := final(ru)
				res.Meta = mcp.Meta{metaRelated: map[string]any{"taskId": ru.id}}
				return res, nil
			}
		}
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/list", func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*listTasksResult, error) {
		if isModern, _ := modern(p.Meta); isModern {
			return nil, methodNotFound("tasks/list") // no listing across callers there
		}
		if p.Cursor != "" {
			return nil, invalidParams(errors.New("invalid cursor: tasks/list answers every task of yours in one page"))
		}
		out := &listTasksResult{Tasks: []task{}}
		for _, ru := range r.list(owner(ctx)) {
			out.Tasks = append(out.Tasks, r.task(ru))
		}
		return out, nil
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/cancel", func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
		isModern, declared := modern(p.Meta)
		if isModern && !declared {
			return nil, needCapability()
		}
		was, err := r.cancelRun(ctx, p.TaskID, owner(ctx))
		if err != nil {
			return nil, invalidParams(err)
		}
		if isModern {
			return &ackResult{ResultType: "complete"}, nil
		}
		if !was {
			return nil, invalidParams(errors.New("the task has already ended, so it cannot be cancelled"))
		}
		ru, err := r.get(ctx, p.TaskID, owner(ctx))
		if err != nil {
			return nil, invalidParams(err)
		}
		return &taskResult{task: r.task(ru)}, nil
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/update", func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*ackResult, error) {
		isModern, declared := modern(p.Meta)
		if !isModern {
			return nil, methodNotFound("tasks/update")
		}
		if !declared {
			return nil, needCapability()
		}
		// exec never asks for input, so there is nothing to apply.
		if _, err := r.get(ctx, p.TaskID, owner(ctx)); err != nil {
			return nil, invalidParams(err)
		}
		return &ackResult{ResultType: "complete"}, nil
	}))
	s.AddReceivingMiddleware(h.tasksMiddleware)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			var o string
			if e := req.GetExtra(); e != nil && e.TokenInfo != nil {
				o = "oauth " + e.TokenInfo.UserID // as identity
			}
			return next(context.WithValue(ctx, ownerKey{}, o), method, req)
		}
	})
}

// tasksMiddleware advertises tasks and answers task-augmented calls of exec.
func (h *handler) tasksMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil {
				return withTasksCapability(ir)
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				return withTaskSupport(lr), nil
			}
			return res, err
		case "tools/call":
			if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil && cr.Params.Name == toolName {
				_, asked := cr.Params.Meta[metaTask]
				_, declared := modern(cr.Params.Meta)
				if asked || declared {
					return h.callAsTask(ctx, cr, next, asked)
				}
			}
		}
		return next(ctx, method, req)
	}
}

type initializeWithTasks struct {
	*mcp.InitializeResult
	Capabilities map[string]any `json:"capabilities"`
}

func withTasksCapability(ir *mcp.InitializeResult) (mcp.Result, error) {
	b, err := json.Marshal(ir.Capabilities)
	if err != nil {
		return nil, err
	}
	caps := map[string]any{}
	if err := json.Unmarshal(b, &caps); err != nil {
		return nil, err
	}
	caps["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
		"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
	return &initializeWithTasks{InitializeResult: ir, Capabilities: caps}, nil
}

type toolWithExecution struct {
	*mcp.Tool
	Execution map[string]string `json:"execution,omitempty"`
}

type toolsWithExecution struct {
	*mcp.ListToolsResult
	Tools []toolWithExecution `json:"tools"`
}

func withTaskSupport(lr *mcp.ListToolsResult) mcp.Result {
	out := &toolsWithExecution{ListToolsResult: lr, Tools: make([]toolWithExecution, 0, len(lr.Tools))}
	for _, t := range lr.Tools {
		tw := toolWithExecution{Tool: t}
		if t.Name == toolName {
			// optional, not required: a plain tools/call of exec still works.
			tw.Execution = map[string]string{"taskSupport": "optional"}
		}
		out.Tools = append(out.Tools, tw)
	}
	return out
}

// callAsTask runs a call of exec as a background run, through the same handler (the
// arguments with background true), and answers with its task: always for a
// 2025-11-25 call that asked (asked), and for a 2026-07-28 one when the run has not
// ended within taskPoll.
func (h *handler) callAsTask(ctx context.Context, req *mcp.CallToolRequest, next mcp.MethodHandler, asked bool) (mcp.Result, error) {
	args := map[string]json.RawMessage{}
	if len(req.Params.Arguments) > 0 && json.Unmarshal(req.Params.Arguments, &args) != nil {
		return next(ctx, "tools/call", req) // the SDK refuses it as any call
	}
	args["background"] = json.RawMessage("true")
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	params := *req.Params
	params.Arguments = b
	bg := *req
	bg.Params = &params
	res, err := next(ctx, "tools/call", &bg)
	if err != nil {
		return nil, err
	}
	cr, ok := res.(*mcp.CallToolResult)
	if !ok {
		return res, nil
	}
	own := owner(ctx)
	var ru *run
	if id := runID(cr); id != "" {
		ru, err = h.runs.get(ctx, id, own)
	}
	if ru == nil || err != nil {
		if !asked {
			// 2026-07-28: the server need not answer with a task, so a call refused in
			// the background (over a bound, or invalid) is made as an ordinary one.
			return next(ctx, "tools/call", req)
		}
		// 2025-11-25 needs a task: one that has failed with the refusal. A refusal
		// over the bounds refuses this one too, and the call gets its error.
		ru, err = h.runs.start(ctx, own, 0, func(context.Context, func(launcher.Progress)) (*mcp.CallToolResult, any, error) {
			return cr, nil, nil
		})
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		<-ru.done
		return &createTaskResult{Task: h.runs.task(ru)}, nil
	}
	if !asked {
		if ru, done, _ := h.runs.wait(ctx, ru.id, own, taskPoll); done {
			// Answered inline, so no one will ask for it: it must not hold a place
			// under the bounds for a TTL.
			h.runs.forget(ctx, ru.id, own)
			return final(ru), nil
		}
		return &taskV2Result{taskV2: h.runs.taskV2(ru)}, nil
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil && !h.runs.shared() {
		go taskProgress(req.Session, tok, ru)
	}
	return &createTaskResult{Task: h.runs.task(ru)}, nil
}

// runID is the run_id of exec's answer for a run started in the background.
func runID(res *mcp.CallToolResult) string {
	if res.IsError {
		return ""
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return ""
	}
	var v struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal(b, &v)
	return v.RunID
}

// taskProgress sends the call's progress token a notifications/progress about once a
// second until the run ends or a send fails. The context is a fresh one: one that
// carries the answered request is refused on HTTP (its stream has closed).
func taskProgress(ss *mcp.ServerSession, tok any, ru *run) {
	t := time.NewTicker(waitInterval)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ru.done:
			return
		case <-t.C:
		}
		msg := "waiting for a sandbox"
		if p := ru.progress.Load(); p != nil {
			msg = progressMessage(*p)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: tok, Progress: math.Round(time.Since(start).Seconds()*1000) / 1000, Message: msg,
		})
		cancel()
		if err != nil {
			return
		}
	}
}

// list is owner's runs, oldest first.
func (r *runs) list(owner string) []*run {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked()
	var out []*run
	for _, ru := range r.byID {
		if ru.owner == owner {
			out = append(out, ru)
		}
	}
	slices.SortFunc(out, func(a, b *run) int { return a.started.Compare(b.started) })
	return out
}

// forget removes an ended run without remembering it as expired: its result was
// handed out as the call's own answer.
func (r *runs) forget(ctx context.Context, id, owner string) {
	if r.shared() {
		if err := r.o.Store.Forget(ctx, id, owner); err != nil && !errors.Is(err, backend.ErrRunNotFound) {
			r.log.Warn().Err(err).Str("run", handleHash(id)).Msg("removing a background run answered inline (its TTL will)")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ru, ok := r.byID[id]; ok {
		r.removeLocked(ru)
	}
}
