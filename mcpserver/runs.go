package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Background runs: a call that answers at once with a handle (run_id) while its body
// goes on under a context of its own, so that a client that goes away does not end
// it; run_wait hands out its result, run_cancel ends it. The registry knows nothing of
// exec: it runs a body and keeps what the body returned, so that MCP tasks (a task is a
// run seen through tasks/get, tasks/result and tasks/cancel) can share it. Like the
// session store, it keeps this server's runs in its memory. See docs/background-runs.md.

// RunOptions configure background runs. Max 0 removes them: no "background" argument,
// no run_wait or run_cancel.
type RunOptions struct {
	// Max bounds the runs this server keeps at once: running, or ended with their result
	// kept until TTL. It bounds the memory results take (Max times one result's caps).
	Max int
	// MaxPerIdentity bounds one identity's (see identity) runs, counted as Max; 0 is no
	// bound but Max.
	MaxPerIdentity int
	// TTL is how long a result is kept after its run ends; 0 is 15 min.
	TTL time.Duration
	// MaxBytes bounds the memory of the runs this server keeps: a running run holds
	// the most its result can take (resultCap) and an ended one its result's size, so
	// that a run is refused at its start rather than its result lost at its end. 0 is no
	// bound but Max.
	MaxBytes int64

	// Now is the registry's clock, for TTLs and elapsed times; nil is time.Now.
	Now func() time.Time

	// Store and Sandboxes, when both are set, keep runs outside this server, where
	// every replica answers for every run (runs_shared.go: Kubernetes); Max and
	// MaxPerIdentity then bound the store's runs (every replica's together), and TTL
	// is the store's. Code mode's tools and egress profiles are refused there.
	Store     RunStore
	Sandboxes RunSandboxes
}

// The settings background runs' refusals name.
const (
	SettingMaxBackgroundRuns            backend.Setting = "max-background-runs"
	SettingMaxBackgroundRunsPerIdentity backend.Setting = "max-background-runs-per-identity"
	SettingRunTTL                       backend.Setting = "run-ttl-s"
	SettingRunResultsMaxBytes           backend.Setting = "run-results-max-bytes"
)

const (
	toolRunWait   = "run_wait"
	toolRunCancel = "run_cancel"

	// defaultRunWait and maxRunWait bound run_wait's timeout_s: long enough to save
	// polls, short enough for a client's own request timeout.
	defaultRunWait = 10 * time.Second
	maxRunWait     = 60 * time.Second

	// runBackstop is added to a run's own timeout for its context's deadline: the
	// runner ends a run at its timeout (counted from the code's delivery); this ends
	// one that waits for a sandbox, or for an engine, past any reason.
	runBackstop = 10 * time.Minute

	// resultOverhead is what a result holds besides its output and files: the text's
	// headers and file list, the structured fields, code mode's tool_calls (at most
	// maxListedCalls records and their groups).
	resultOverhead = 64 << 10

	// maxExpired bounds the handles remembered as expired (to answer "expired" rather
	// than "not found"); the oldest are forgotten first.
	maxExpired = 4096
)

// runBody is what a run does: the result of a call made in the background (res, out
// and err as a tool handler returns them). progress receives the runner's reports.
type runBody func(ctx context.Context, progress func(launcher.Progress)) (*mcp.CallToolResult, any, error)

// runs is the registry of this server's background runs.
type runs struct {
	o    RunOptions
	vars backend.Vars
	// result is exec's answer for a shared run's result (the handler's).
	result func(res launcher.Result, timeout time.Duration) (*mcp.CallToolResult, any)
	log    zerolog.Logger
	now    func() time.Time
	cap    int64 // the most one result can take (resultCap), held by a run until it ends

	mu      sync.Mutex
	byID    map[string]*run
	bytes   int64             // held by the runs in byID
	owned   map[string]int    // runs kept, by owner
	expired map[string]string // handle -> owner, of results removed at TTL
	order   []string          // expired's handles, oldest first
}

// run is one background run. The fields after done are set before done is closed.
type run struct {
	id, owner string
	started   time.Time
	timeout   time.Duration   // the run's own, for expires_at
	ctx       context.Context // the run's, from reserve to launch
	cancel    context.CancelFunc
	canceled  atomic.Bool // by run_cancel
	progress  atomic.Pointer[launcher.Progress]
	done      chan struct{}

	size  int64 // bytes held under MaxBytes: cap while it runs, then its result's; under mu
	ended time.Time
	res   *mcp.CallToolResult
	out   map[string]any // the structured result, nil with err
	err   error
}

// newRuns is the registry; limit is the runner's, for the most one result can take.
func newRuns(o RunOptions, vars backend.Vars, log zerolog.Logger, limit runnerLimits) *runs {
	if o.TTL <= 0 {
		o.TTL = 15 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &runs{o: o, vars: vars, log: log, now: o.Now, cap: resultCap(limit),
		byID: map[string]*run{}, owned: map[string]int{}, expired: map[string]string{}}
}

// resultCap is the most a kept result can take in memory (ResultCap of the runner's
// limits).
func resultCap(l runnerLimits) int64 {
	return ResultCap(int64(l.MaxOutputBytes), int64(l.MaxOutputFilesBytes))
}

// ResultCap is the most a background run's kept result can take in memory, the output
// capped at maxOutputBytes and the returned files at maxOutputFilesBytes: its stdout and
// stderr twice (the structured fields and the text), its files, and resultOverhead. A
// RunOptions.MaxBytes below it refuses every run.
func ResultCap(maxOutputBytes, maxOutputFilesBytes int64) int64 {
	return 2*maxOutputBytes + maxOutputFilesBytes + resultOverhead
}

// approxSize is n as size writes it when exact, else in MiB to a tenth.
func approxSize(n int64) string {
	if n < 1<<20 || n%(1<<20) == 0 {
		return size(int(n))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// resultSize is what a kept result takes: its structured fields, its content (text,
// files) and its error.
func resultSize(res *mcp.CallToolResult, out map[string]any, err error) int64 {
	n := valueSize(out)
	if err != nil {
		n += int64(len(err.Error()))
	}
	if res == nil {
		return n
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			n += int64(len(c.Text))
		case *mcp.ImageContent:
			n += int64(len(c.Data))
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				n += int64(len(c.Resource.Text) + len(c.Resource.Blob))
			}
		}
	}
	return n
}

// valueSize is the bytes of v's strings and keys, and a word for anything else: what a
// decoded JSON value holds, within its maps' and slices' own overhead.
func valueSize(v any) int64 {
	switch v := v.(type) {
	case string:
		return int64(len(v))
	case map[string]any:
		var n int64
		for k, x := range v {
			n += int64(len(k)) + valueSize(x)
		}
		return n
	case []any:
		var n int64
		for _, x := range v {
			n += valueSize(x)
		}
		return n
	}
	return 8
}

// start runs body in the background for owner, under a context detached from ctx
// (its values kept, its cancellation not) that ends at run_cancel or timeout plus
// runBackstop. It refuses a run over a bound.
func (r *runs) start(ctx context.Context, owner string, timeout time.Duration, body runBody) (*run, error) {
	ru, err := r.reserve(ctx, owner, timeout)
	if err != nil {
		return nil, err
	}
	r.launch(ru, body)
	return ru, nil
}

// reserve counts a run of owner's under the bounds, or refuses it; launch then starts
// it, or drop forgets it. Between the two the caller takes what the run needs besides
// (a session's claim), so that a run over a bound takes nothing.
func (r *runs) reserve(ctx context.Context, owner string, timeout time.Duration) (*run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked()
	if err := r.bounded(len(r.byID), r.owned[owner]); err != nil {
		return nil, err
	}
	if b := r.o.MaxBytes; b > 0 && r.bytes+r.cap > b {
		r.log.Warn().Int64("max_bytes", b).Int64("held_bytes", r.bytes).Msg("background run refused: results' memory")
		return nil, fmt.Errorf("not enough memory for another background run's result: this server keeps at most %s of results (%s), %s of it held now, and a run holds %s until it ends (the most its result can take: twice the output cap plus the output files' cap), then its result's size until it expires (%s after its run ends); wait for a run to end or a result to expire, cancel a running one with %s, or call exec without background",
			approxSize(b), r.vars.Name(SettingRunResultsMaxBytes), approxSize(r.bytes), approxSize(r.cap), r.o.TTL, toolRunCancel)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+runBackstop)
	ru := &run{id: newHandle("run_"), owner: owner, started: r.now(), timeout: timeout, ctx: rctx, cancel: cancel, done: make(chan struct{}), size: r.cap}
	r.byID[ru.id] = ru
	r.bytes += ru.size
	r.owned[owner]++
	return ru, nil
}

// launch starts the reserved run ru's body.
func (r *runs) launch(ru *run, body runBody) {
	r.log.Info().Str("run", handleHash(ru.id)).Int64("timeout_ms", ru.timeout.Milliseconds()).Msg("background run started")
	go r.do(ru.ctx, ru, body)
}

// runHashKey is the context key of the hash of the background run a call runs as
// (the "run" of its log lines), for its egress audit lines (backend.AuditLabel).
type runHashKey struct{}

// runHashOf is the hash of the background run that ctx runs, or "".
func runHashOf(ctx context.Context) string {
	h, _ := ctx.Value(runHashKey{}).(string)
	return h
}

// drop forgets the reserved run ru, which never started.
func (r *runs) drop(ru *run) {
	ru.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(ru)
}

// bounded refuses a run when all runs are kept (owned of them the caller's): over a
// bound, the error names it.
func (r *runs) bounded(all, owned int) error {
	if all >= r.o.Max {
		r.log.Warn().Int("max", r.o.Max).Msg("background run refused: too many runs")
		return fmt.Errorf("too many background runs: this server keeps at most %d at once, running or with a result not yet expired (%s); cancel a running one with %s, wait for a result to expire (%s after its run ends), or call exec without background",
			r.o.Max, r.vars.Name(SettingMaxBackgroundRuns), toolRunCancel, r.o.TTL)
	}
	if n := r.o.MaxPerIdentity; n > 0 && owned >= n {
		r.log.Warn().Int("per_identity", n).Msg("background run refused: too many runs for this identity")
		return fmt.Errorf("too many background runs for you: one identity keeps at most %d at once, running or with a result not yet expired (%s); cancel one with %s, wait for a result to expire (%s after its run ends), or call exec without background",
			n, r.vars.Name(SettingMaxBackgroundRunsPerIdentity), toolRunCancel, r.o.TTL)
	}
	return nil
}

// do runs ru's body and keeps what it returned until TTL.
func (r *runs) do(ctx context.Context, ru *run, body runBody) {
	ctx = context.WithValue(ctx, runHashKey{}, handleHash(ru.id))
	res, out, err := body(ctx, func(p launcher.Progress) { ru.progress.Store(&p) })
	ru.cancel()
	switch {
	case ru.canceled.Load():
		err = fmt.Errorf("the run was cancelled (%s), so it has no result", toolRunCancel)
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("the run did not end within its timeout plus %s (waiting for a sandbox or the engine), so it was stopped and has no result", runBackstop)
	}
	if err == nil {
		ru.res = res
		ru.out, err = asObject(out)
	}
	ru.err = err
	size := resultSize(ru.res, ru.out, err)
	r.mu.Lock()
	ru.ended = r.now()
	if _, ok := r.byID[ru.id]; ok {
		r.bytes += size - ru.size
	}
	ru.size = size
	close(ru.done)
	r.mu.Unlock()
	r.log.Info().Str("run", handleHash(ru.id)).Bool("result", err == nil).Msg("background run ended")
	time.AfterFunc(r.o.TTL, func() {
		r.mu.Lock()
		r.sweepLocked()
		r.mu.Unlock()
	})
}

// asObject is out as a JSON object, to which run_wait adds run_id and status.
func asObject(out any) (map[string]any, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("keeping the run's result: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("keeping the run's result: %w", err)
	}
	return m, nil
}

// sweepLocked removes the results kept past TTL, remembering their handles as
// expired. Called with mu held.
func (r *runs) sweepLocked() {
	now := r.now()
	for id, ru := range r.byID {
		if ru.ended.IsZero() || now.Before(ru.ended.Add(r.o.TTL)) {
			continue
		}
		r.removeLocked(ru)
		if len(r.order) >= maxExpired {
			delete(r.expired, r.order[0])
			r.order = r.order[1:]
		}
		r.expired[id] = ru.owner
		r.order = append(r.order, id)
		r.log.Info().Str("run", handleHash(id)).Msg("background run's result expired")
	}
}

// removeLocked forgets ru and what it held. Called with mu held.
func (r *runs) removeLocked(ru *run) {
	delete(r.byID, ru.id)
	r.bytes -= ru.size
	if r.owned[ru.owner]--; r.owned[ru.owner] <= 0 {
		delete(r.owned, ru.owner)
	}
}

// errRunNotFound is the same for a handle that never was and another identity's.
func errRunNotFound() error {
	return errors.New("run_id not found: no background run of yours has this run_id; start one with exec and background true")
}

func (r *runs) errExpired() error {
	return fmt.Errorf("run expired: its result was kept for %s after the run ended (%s), then removed; run it again", r.o.TTL, r.vars.Name(SettingRunTTL))
}

// get is owner's run id, or the error run_wait and run_cancel answer. A shared run
// (one not in this server's memory) is looked at in its sandbox.
func (r *runs) get(ctx context.Context, id, owner string) (*run, error) {
	ru, err := r.local(id, owner)
	if err != nil && r.shared() && errors.Is(err, errNotHere) {
		return r.getShared(ctx, id, owner)
	}
	return ru, err
}

// errNotHere is errRunNotFound from this server's memory: a shared run may still have
// the handle.
var errNotHere error = notHere{}

type notHere struct{}

func (notHere) Error() string { return errRunNotFound().Error() }

func (r *runs) local(id, owner string) (*run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked()
	if ru, ok := r.byID[id]; ok && ru.owner == owner {
		return ru, nil
	}
	if o, ok := r.expired[id]; ok && o == owner {
		return nil, r.errExpired()
	}
	return nil, errNotHere
}

// wait waits up to d for owner's run id to end; done says whether it has.
func (r *runs) wait(ctx context.Context, id, owner string, d time.Duration) (*run, bool, error) {
	ru, err := r.local(id, owner)
	if err != nil && r.shared() && errors.Is(err, errNotHere) {
		return r.waitShared(ctx, id, owner, d)
	}
	if err != nil {
		return nil, false, err
	}
	select {
	case <-ru.done: // first: select picks at random among ready cases, and d may be 0
		return ru, true, nil
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ru.done:
		return ru, true, nil
	case <-t.C:
		return ru, false, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// cancelRun ends owner's run id: true when it was running. Its result is then the error
// saying so.
func (r *runs) cancelRun(ctx context.Context, id, owner string) (bool, error) {
	ru, err := r.local(id, owner)
	if err != nil && r.shared() && errors.Is(err, errNotHere) {
		return r.cancelShared(ctx, id, owner)
	}
	if err != nil {
		return false, err
	}
	select {
	case <-ru.done:
		return false, nil
	default:
	}
	ru.canceled.Store(true)
	ru.cancel()
	<-ru.done // the runner has stopped the sandbox (its removal goes on in the background)
	r.log.Info().Str("run", handleHash(id)).Msg("background run cancelled")
	return true, nil
}

// expiresAt is when ru's result is removed at the latest if the run takes its whole
// timeout (or, once it has ended, exactly).
func (r *runs) expiresAt(ru *run) time.Time {
	select {
	case <-ru.done:
		return ru.ended.Add(r.o.TTL)
	default:
		return ru.started.Add(ru.timeout + r.o.TTL)
	}
}

// startedResult is exec's answer for a run in the background.
func (r *runs) startedResult(ru *run) (*mcp.CallToolResult, any) {
	exp := r.expiresAt(ru).UTC().Format(time.RFC3339)
	out := map[string]any{"run_id": ru.id, "status": "running", "expires_at": exp}
	text := fmt.Sprintf("run_id: %s\nstatus: running\nexpires_at: %s (the result is kept %s after the run ends)\nCall %s with this run_id for its result (or %s to stop it). Keep the run_id secret: it is the run's only key.",
		ru.id, exp, r.o.TTL, toolRunWait, toolRunCancel)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out
}

type runWaitInput struct {
	RunID string `json:"run_id" jsonschema:"The run_id exec returned."`
	// TimeoutS is a pointer so that absent (the default) differs from 0 (do not wait).
	TimeoutS *int64 `json:"timeout_s,omitempty" jsonschema:"Seconds to wait for the run to end, from 0 (just look) to 60. Optional; absent means 10."`
}

type runCancelInput struct {
	RunID string `json:"run_id" jsonschema:"The run_id exec returned."`
}

type runCancelOutput struct {
	Canceled bool `json:"canceled" jsonschema:"True when this call stopped the run; false when it had already ended."`
}

// waitTool is run_wait.
func (r *runs) waitTool(ctx context.Context, req *mcp.CallToolRequest, in runWaitInput) (*mcp.CallToolResult, any, error) {
	d := defaultRunWait
	if in.TimeoutS != nil {
		if *in.TimeoutS < 0 || *in.TimeoutS > int64(maxRunWait/time.Second) {
			return nil, nil, fmt.Errorf("timeout_s is %d; it must be a whole number of seconds from 0 to %d (run_wait's limit; absent means %d): call run_wait again to wait longer",
				*in.TimeoutS, int64(maxRunWait/time.Second), int64(defaultRunWait/time.Second))
		}
		d = time.Duration(*in.TimeoutS) * time.Second
	}
	stop := r.notify(ctx, req, in.RunID)
	ru, done, err := r.wait(ctx, in.RunID, identity(req), d)
	stop()
	if err != nil {
		return nil, nil, err
	}
	if !done {
		return r.running(ru)
	}
	if ru.err != nil {
		return nil, nil, ru.err
	}
	out := make(map[string]any, len(ru.out)+2)
	for k, v := range ru.out {
		out[k] = v
	}
	out["run_id"], out["status"] = ru.id, "completed"
	content := append([]mcp.Content(nil), ru.res.Content...)
	head := fmt.Sprintf("run_id: %s\nstatus: completed\n", ru.id)
	if t, ok := firstText(content); ok {
		content[0] = &mcp.TextContent{Text: head + t}
	} else {
		content = append([]mcp.Content{&mcp.TextContent{Text: head}}, content...)
	}
	return &mcp.CallToolResult{Content: content, StructuredContent: out}, nil, nil
}

func firstText(c []mcp.Content) (string, bool) {
	if len(c) == 0 {
		return "", false
	}
	t, ok := c[0].(*mcp.TextContent)
	if !ok {
		return "", false
	}
	return t.Text, true
}

// notify sends run_wait's caller, when its request carries a progress token, a
// notifications/progress about once a second while it waits: progress the seconds
// since run_wait was called, the message the run's as exec's would be. stop ends it
// before run_wait answers, so that none follows the answer.
func (r *runs) notify(ctx context.Context, req *mcp.CallToolRequest, id string) (stop func()) {
	if req == nil || req.Session == nil || req.Params == nil || req.Params.GetProgressToken() == nil {
		return func() {}
	}
	ru, err := r.local(id, identity(req))
	if err != nil {
		return func() {} // a shared run: run_wait's answer carries its progress
	}
	token, start := req.Params.GetProgressToken(), time.Now()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(waitInterval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ru.done:
				return
			case <-t.C:
			}
			msg := "waiting for a sandbox"
			if p := ru.progress.Load(); p != nil {
				msg = progressMessage(*p)
			}
			// Errors (the client went away) end nothing: run_wait's answer says all.
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: math.Round(time.Since(start).Seconds()*1000) / 1000, Message: msg,
			})
		}
	}()
	return func() { close(quit); <-done }
}

// running is run_wait's answer for a run still running.
func (r *runs) running(ru *run) (*mcp.CallToolResult, any, error) {
	var p launcher.Progress
	if lp := ru.progress.Load(); lp != nil {
		p = *lp
	}
	elapsed := r.now().Sub(ru.started).Milliseconds()
	out := map[string]any{"run_id": ru.id, "status": "running", "stdout_tail": p.StdoutTail, "stderr_tail": p.StderrTail, "elapsed_ms": elapsed}
	text := fmt.Sprintf("run_id: %s\nstatus: running (%d ms since it started; call %s again)", ru.id, elapsed, toolRunWait)
	section := func(name, s string) {
		if s != "" {
			text += fmt.Sprintf("\n--- %s, the last lines so far ---\n%s", name, s)
		}
	}
	section("stdout", p.StdoutTail)
	section("stderr", p.StderrTail)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil, nil
}

// cancelTool is run_cancel.
func (r *runs) cancelTool(ctx context.Context, req *mcp.CallToolRequest, in runCancelInput) (*mcp.CallToolResult, runCancelOutput, error) {
	was, err := r.cancelRun(ctx, in.RunID, identity(req))
	if err != nil {
		return nil, runCancelOutput{}, err
	}
	text := "canceled: false (the run had already ended; run_wait gives its result)"
	if was {
		text = "canceled: true (the run is stopped and its sandbox removed; run_wait now says it was cancelled)"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, runCancelOutput{Canceled: was}, nil
}

// addTools adds run_wait and run_cancel.
func (r *runs) addTools(srv *mcp.Server) {
	f, t := false, true
	ws, err := jsonschema.For[runWaitInput](nil)
	if err != nil {
		panic("mcpserver: inferring run_wait's input schema: " + err.Error()) // a bug in runWaitInput
	}
	ts := ws.Properties["timeout_s"]
	ts.Types, ts.Type = nil, "integer"
	mcp.AddTool(srv, &mcp.Tool{
		Name: toolRunWait,
		Description: fmt.Sprintf(`Wait for a background run (exec with "background": true) and get its result. Waits up to timeout_s seconds (default %d, at most %d). When the run has ended, the result is exactly exec's (stdout, stderr, exit_code, ..., files, and the files as content) plus run_id and status "completed"; a run that could not run (or was cancelled) is a tool error, as exec's would be. While it runs: status "running", elapsed_ms, and the last lines of stdout and stderr so far (stdout_tail, stderr_tail): call run_wait again.

A result is kept %s after its run ends, for any number of run_wait calls, then removed ("expired"). At most %d runs at once on this server, running or with a result kept%s.`,
			int64(defaultRunWait/time.Second), int64(maxRunWait/time.Second), r.o.TTL, r.o.Max, perIdentityNote(r.o.MaxPerIdentity)),
		InputSchema: ws,
		Annotations: &mcp.ToolAnnotations{Title: "Wait for a background run", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f},
	}, r.waitTool)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        toolRunCancel,
		Description: "Stop a background run (exec with \"background\": true): its sandbox and every process in it are killed, and run_wait then says it was cancelled. Cancelling a run that has already ended is not an error (canceled: false) and keeps its result.",
		Annotations: &mcp.ToolAnnotations{Title: "Stop a background run", DestructiveHint: &t, IdempotentHint: true, OpenWorldHint: &f},
	}, r.cancelTool)
}

func perIdentityNote(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(", at most %d of them yours", n)
}

// backgroundNote is what exec's description adds when background runs are on.
func backgroundNote(o RunOptions) string {
	if o.Max <= 0 {
		return ""
	}
	return fmt.Sprintf(`

Background: with "background": true the call answers at once with run_id, status "running" and expires_at, and the program runs on, with the same limits and timeout_s, even if this client disconnects; call %s with the run_id for the result (the same as this tool's), or %s to stop it. The result is kept %s after the run ends. At most %d runs at once on this server, running or with a result kept.`, toolRunWait, toolRunCancel, o.TTL, o.Max)
}

// background starts exec's call in as a background run, body its foreground body, and
// answers with the run's handle. Its arguments are checked first, so that a call that
// could not run is refused now rather than as the run's result. In a session, the
// session is claimed now, before the answer, and stays busy until the run ends
// (sessions.background).
func (h *handler) background(ctx context.Context, req *mcp.CallToolRequest, in execInput, body runBody) (*mcp.CallToolResult, any, error) {
	id := newExecID()
	inSession := in.SessionID != "" && h.sessions != nil
	if inSession && h.sessions.o.shared() {
		// A shared run has a pod of its own, and a session's calls run in the
		// session's pod: keeping a session's call in its pod is not built yet.
		return nil, nil, &invalidInput{"background", "background cannot be used with session_id on this server (kubernetes: a background run has a pod of its own, a session's call runs in the session's): run the call in the session without background, or in the background without session_id"}
	}
	job, err := newJob(in, h.opts)
	if err != nil {
		h.logRejected(id, in, err)
		return nil, nil, err
	}
	if h.runs.shared() {
		if h.opts.Upstreams != nil {
			return nil, nil, &invalidInput{"background", "background runs on this backend cannot call upstream tools yet (their bridge would be served by one replica only): call exec without background"}
		}
		ru, err := h.runs.startShared(ctx, identity(req), job)
		if err != nil {
			return nil, nil, err
		}
		res, out := h.runs.startedResult(ru)
		return res, out, nil
	}
	ru, err := h.runs.reserve(ctx, identity(req), job.Timeout)
	if err != nil {
		return nil, nil, err
	}
	if inSession {
		c, err := h.sessions.claim(ctx, req, in.SessionID, job.Timeout)
		if err != nil {
			h.runs.drop(ru)
			h.log.Info().Str("exec_id", id).Str("session", handleHash(in.SessionID)).Msg("exec refused: session")
			return nil, nil, err
		}
		body = h.sessions.background(c, body)
	}
	h.runs.launch(ru, body)
	res, out := h.runs.startedResult(ru)
	return res, out, nil
}

// backgroundOutputSchema is exec's output schema s with background runs on: either a
// result (s's required fields) or a run started in the background (run_id, status,
// expires_at).
func backgroundOutputSchema(s *jsonschema.Schema, o Options) *jsonschema.Schema {
	if o.Runs.Max <= 0 {
		return s
	}
	str := func(d string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: d} }
	s.Properties["run_id"] = str(`With background: the run's handle, for run_wait and run_cancel. Keep it secret: it is the run's only key.`)
	s.Properties["status"] = str(`With background: "running".`)
	s.Properties["expires_at"] = str(`With background: when the result is removed at the latest if the run takes its whole timeout (RFC 3339, UTC).`)
	s.AnyOf = []*jsonschema.Schema{{Required: s.Required}, {Required: []string{"run_id", "status", "expires_at"}}}
	s.Required = nil
	return s
}
