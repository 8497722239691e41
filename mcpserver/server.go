package mcpserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Runner runs one job in a fresh sandbox. launcher.Launcher satisfies it.
//
// A program that fails, times out or is OOM-killed is a Result, not an error;
// an error means the sandbox itself could not do its job.
type Runner interface {
	Run(ctx context.Context, job launcher.Job) (launcher.Result, error)
	// Options are the runner's own. The runner holds a result to their caps
	// (MaxOutputBytes, MaxFileBytes, MaxFilesBytes) and runs their Python; the tool
	// description states them and a truncated result names its cap, read from here
	// so that there is one copy of each. A zero field means the launcher's default.
	Options() launcher.Options
}

// Options configures the server. The zero value of every field means its
// default, so Options{} is a valid configuration.
type Options struct {
	// Name and Version identify the server to clients in the MCP handshake.
	// "" means "mcp-exec" and "dev" respectively.
	Name, Version string
	// MaxCodeBytes is the largest accepted "code" argument, in bytes.
	// Zero or negative means 1 MiB (1048576).
	MaxCodeBytes int
	// MaxStdinBytes is the largest accepted "stdin" argument, in bytes.
	// Zero or negative means 1 MiB (1048576).
	MaxStdinBytes int
	// DefaultTimeout applies when a call has no timeout_s.
	// Zero or negative means 30s; it is lowered to MaxTimeout if above it.
	DefaultTimeout time.Duration
	// MaxTimeout caps timeout_s; larger requests are lowered to it, not refused.
	// Zero or negative means 300s.
	MaxTimeout time.Duration
	// MaxFiles is the most input files ("files") one call may carry.
	// Zero or negative means 32.
	MaxFiles int
	// MaxFileBytes is the largest accepted input file, in bytes after
	// decoding. Zero or negative means 8 MiB (8388608).
	MaxFileBytes int
	// MaxFilesBytes caps the input files of one call together, in bytes after
	// decoding. Zero or negative means 16 MiB (16777216).
	MaxFilesBytes int
	// Upstreams, when set, lets programs call the tools of other MCP servers
	// (code mode): exec's description gains their index, its result tool_calls,
	// and a second tool, tools_search, appears. nil: exec alone, as always.
	Upstreams Upstreams
	// Languages lists what exec's "language" may name (launcher.LanguagePython and
	// launcher.OtherLanguages), checked against the image by the caller (the runner
	// refuses an interpreter it lacks only when a call needs it). Empty: no such field;
	// every program is Python.
	Languages []string
	// Egress lists the egress profiles a call may name in "egress"; the
	// runner enforces them. Empty: no such field, and the tool is as without it.
	Egress []EgressProfile
	// Sessions, when Max > 0 and a Backend (or a Store and Attach) is set, add session_create and
	// session_close, and exec's session_id (sessions.go); with Upstreams, each call in a
	// session gets the tools as a one-shot exec does.
	Sessions SessionOptions
	// Runs, when Max > 0, add exec's "background" and the tools run_wait and
	// run_cancel (runs.go).
	Runs RunOptions
	// Logger receives one metadata-only line per call. The zero value logs
	// nothing (a zero zerolog.Logger has no writer, like zerolog.Nop()).
	Logger zerolog.Logger
	// Vars names the operator's settings in tool errors by their environment
	// variables too (backend.Vars), the runner's errors included (backend.Spell).
	// nil: by flag alone ("--max-code-bytes").
	Vars backend.Vars
}

const mib = 1 << 20

// withDefaults replaces zero values by the documented defaults.
func (o Options) withDefaults() Options {
	o.Name = cmp.Or(o.Name, "mcp-exec")
	o.Version = cmp.Or(o.Version, "dev")
	o.MaxCodeBytes = positive(o.MaxCodeBytes, mib)
	o.MaxStdinBytes = positive(o.MaxStdinBytes, mib)
	o.MaxFiles = positive(o.MaxFiles, 32)
	o.MaxFileBytes = positive(o.MaxFileBytes, 8*mib)
	o.MaxFilesBytes = positive(o.MaxFilesBytes, 16*mib)
	o.MaxTimeout = positive(o.MaxTimeout, 300*time.Second)
	o.DefaultTimeout = min(positive(o.DefaultTimeout, 30*time.Second), o.MaxTimeout)
	return o
}

// runnerLimits are what the runner holds a result to (Runner.Options), as the tool
// description and a truncated result state them.
type runnerLimits struct {
	Python                                  string
	MaxOutputBytes                          int // stdout+stderr together
	MaxOutputFileBytes, MaxOutputFilesBytes int // files from /tmp/outputs: one, all
}

// limitsOf reads the runner's options; a zero field is the launcher's default
// (python3, 1 MiB, 8 MiB, 16 MiB).
func limitsOf(o launcher.Options) runnerLimits {
	return runnerLimits{
		Python:              cmp.Or(o.Python, "python3"),
		MaxOutputBytes:      positive(o.MaxOutputBytes, mib),
		MaxOutputFileBytes:  positive(o.MaxFileBytes, 8*mib),
		MaxOutputFilesBytes: positive(o.MaxFilesBytes, 16*mib),
	}
}

func positive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// New returns an MCP server offering "exec", backed by r (and the session tools and
// tools_search when opts configures them). Connect it to a transport with its Run or
// Connect method.
func New(r Runner, opts Options) *mcp.Server {
	opts = opts.withDefaults()
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}}
	if opts.Runs.Max > 0 {
		caps.AddExtension(extTasks, nil) // tasks.go
	}
	s := mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		// Only what the server has: its tools are added here and never removed,
		// so the tool list cannot change (no listChanged, which the SDK would
		// infer), and it sends no log messages (no logging, the SDK's default).
		Capabilities: caps,
	})
	h := &handler{runner: r, opts: opts, limits: limitsOf(r.Options()), log: opts.Logger}
	s.AddReceivingMiddleware(h.timingMiddleware)
	if opts.Runs.Max > 0 {
		h.runs = newRuns(opts.Runs, opts.Vars, opts.Logger, h.limits)
		h.runs.result = h.sharedResult
		h.runs.addTools(s)
	}
	var note string
	if sessionsOn(opts) {
		h.sessions = newSessions(opts.Sessions, opts.Vars, opts.Logger)
		h.sessions.addTools(s, opts)
		note = sessionsNote(opts)
	}
	if opts.Upstreams != nil {
		h.addCodeMode(s, opts, note)
		h.addTasksIfOn(s)
		return s
	}
	desc := description(opts, h.limits) + backgroundNote(opts.Runs) + note
	mcp.AddTool(s, &mcp.Tool{
		Name:         toolName,
		Description:  desc,
		InputSchema:  inputSchema(opts),
		OutputSchema: backgroundOutputSchema(execOutputSchema(opts), opts),
		Annotations:  annotations(opts),
	}, h.exec)
	h.addTasksIfOn(s)
	return s
}

// addTasksIfOn serves MCP tasks (tasks.go) where background runs are on. Last: its
// middleware must wrap every other.
func (h *handler) addTasksIfOn(s *mcp.Server) {
	if h.runs != nil {
		h.addTasks(s)
	}
}

type handler struct {
	runner   Runner
	opts     Options
	limits   runnerLimits // the runner's, read once
	log      zerolog.Logger
	sessions *sessions // nil: no session tools
	runs     *runs     // nil: no background runs
}

// sessionsOn reports whether o offers sessions.
func sessionsOn(o Options) bool { return o.Sessions.on() }

// exec is the tool handler. The SDK has already checked the arguments
// against the input schema (types, required code, no unknown names); exec
// checks the limits the schema cannot express, runs the job and maps the
// outcome onto the three channels described in the package doc.
//
// When the client's request carries a progress token, the runner's progress
// reports go back as notifications/progress. When the client cancels the call
// (notifications/cancelled), the SDK cancels ctx and the runner stops the
// sandbox.
//
// With background, exec answers at once and the same body runs on in the background
// (runs.go).
func (h *handler) exec(ctx context.Context, req *mcp.CallToolRequest, in execInput) (*mcp.CallToolResult, any, error) {
	if in.Background {
		return h.background(ctx, req, in, func(rctx context.Context, progress func(launcher.Progress)) (*mcp.CallToolResult, any, error) {
			return anyOut(h.run(rctx, req, in, nil, progress))
		})
	}
	return anyOut(h.run(ctx, req, in, nil, nil))
}

// anyOut is a handler's result with its structured output as any, so that exec may
// answer in either of its shapes (backgroundOutputSchema).
func anyOut[T any](res *mcp.CallToolResult, out T, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, err
	}
	return res, out, nil
}

// run is exec's body; bind, when set, adds to the job (code mode's tools). progress,
// when set, gets the runner's reports instead of the request's progress token: the
// call runs in the background, and the request (and its timing) has ended.
func (h *handler) run(ctx context.Context, req *mcp.CallToolRequest, in execInput, bind func(*launcher.Job), progress func(launcher.Progress)) (*mcp.CallToolResult, execOutput, error) {
	var ct *callTiming
	if progress == nil {
		ct = timingOf(ctx)
	}
	if ct != nil {
		ct.handlerStart = monoNow()
	}
	id := newExecID()
	job, err := newJob(in, h.opts)
	if err != nil {
		h.logRejected(id, in, err)
		return nil, execOutput{}, err
	}
	job.Audit = backend.AuditLabel{ExecID: id, Run: runHashOf(ctx)}
	if bind != nil {
		bind(&job)
	}
	if progress != nil {
		job.Progress = progress
	} else if p := startProgress(ctx, req); p != nil {
		job.Progress = p.report
		defer p.stop()
	}
	if ct != nil {
		ct.runStart = monoNow()
	}
	var res launcher.Result
	var sess *sessionInfo
	if in.SessionID != "" && h.sessions != nil {
		res, sess, err = h.sessions.exec(ctx, req, in.SessionID, job)
	} else {
		res, err = h.runner.Run(ctx, job)
	}
	if ct != nil {
		ct.runEnd = monoNow()
		defer func() {
			ct.handlerEnd, ct.id, ct.ran = monoNow(), id, err == nil
			// Only the durations: no caller data.
			ct.res = launcher.Result{QueueWait: res.QueueWait, Duration: res.Duration, Timing: res.Timing}
		}()
	}
	if err != nil {
		var se *sessionError
		if errors.As(err, &se) {
			h.log.Info().Str("exec_id", id).Str("session", handleHash(in.SessionID)).Msg("exec refused: session")
			return nil, execOutput{}, err
		}
		return nil, execOutput{}, h.runnerFailed(id, job, err)
	}
	logged := job
	if sess != nil {
		logged.Egress = sess.egress // a session's calls use its profile, fixed at session_create
	}
	h.logDone(id, logged, res)
	files, infos, images := outputFiles(res.Files)
	out := newOutput(res, infos)
	out.Session = sess
	// Setting Content stops the SDK from filling it with the raw JSON of out,
	// which reads badly for a model or a person looking at a transcript.
	text := &mcp.TextContent{Text: render(out, images, job.Timeout, h.limits.MaxOutputBytes) + sessionText(sess)}
	content := append([]mcp.Content{text}, files...)
	// The deferred p.stop runs before the SDK sends this result, so no
	// progress notification follows it (a client would not expect one).
	return &mcp.CallToolResult{Content: content}, out, nil
}

// runnerFailed logs a runner error and turns it into the tool error the
// client sees. Cancellation is passed through untouched: the caller went away,
// the sandbox is fine, and "sandbox unavailable" would mislead the deployer.
func (h *handler) runnerFailed(id string, job launcher.Job, err error) error {
	if errors.Is(err, context.Canceled) {
		h.log.Info().Str("exec_id", id).Msg("exec canceled")
		return err
	}
	// Load and shutdown are not failures of the sandbox: say what to do.
	if errors.Is(err, launcher.ErrBusy) {
		h.log.Warn().Str("exec_id", id).Msg("exec refused: busy")
		return err
	}
	if errors.Is(err, launcher.ErrClosed) {
		h.log.Info().Str("exec_id", id).Msg("exec refused: shutting down")
		return errors.New("the server is shutting down: try again on another instance or after it restarts")
	}
	// Runner errors describe the infrastructure, never the program, so
	// logging err keeps the no-caller-data rule.
	h.log.Error().Err(backend.Spelled(err, h.opts.Vars)).Str("exec_id", id).
		Int("code_bytes", len(job.Code)).Int("stdin_bytes", len(job.Stdin)).
		Int64("timeout_ms", job.Timeout.Milliseconds()).
		Msg("exec failed: sandbox unavailable")
	return backend.Spelled(fmt.Errorf("sandbox unavailable: %w", err), h.opts.Vars)
}

func (h *handler) logRejected(id string, in execInput, err error) {
	ev := h.log.Info().Str("exec_id", id).
		Int("code_bytes", len(in.Code)).Int("stdin_bytes", len(in.Stdin)).Int("files_in", len(in.Files))
	var inv *invalidInput
	if errors.As(err, &inv) {
		ev = ev.Str("field", inv.field)
	}
	ev.Msg("exec rejected")
}

func (h *handler) logDone(id string, job launcher.Job, res launcher.Result) {
	h.log.Info().Str("exec_id", id).
		Int("code_bytes", len(job.Code)).Int("stdin_bytes", len(job.Stdin)).
		Int64("timeout_ms", job.Timeout.Milliseconds()).
		Int("exit_code", res.ExitCode).Int64("duration_ms", res.Duration.Milliseconds()).
		Int("stdout_bytes", len(res.Stdout)).Int("stderr_bytes", len(res.Stderr)).
		Bool("truncated", res.Truncated).Bool("timed_out", res.TimedOut).
		Bool("oom_killed", res.OOMKilled).Int64("queue_wait_ms", res.QueueWait.Milliseconds()).
		Int64("engine_wait_ms", res.EngineWait.Milliseconds()).
		Int("files_in", len(job.Files)).Int("files_in_bytes", filesBytes(job.Files)).
		Int("files_out", len(res.Files)).Bool("progress", job.Progress != nil).
		Func(func(e *zerolog.Event) {
			if job.Egress != "" {
				e.Str("egress", job.Egress) // the operator's profile name
			}
			// One of the configured names; Python, the default, goes unsaid, as in the
			// lines of a server without languages, so that most lines stay as they were.
			if job.Language != "" && job.Language != launcher.LanguagePython {
				e.Str("language", job.Language)
			}
		}).
		Msg("exec")
}

// filesBytes is the total size of the input files: a size, never a name.
func filesBytes(files []launcher.File) int {
	n := 0
	for _, f := range files {
		n += len(f.Data)
	}
	return n
}

// newExecID returns a short random id that ties one call's log lines
// together without revealing anything about the call.
func newExecID() string {
	var b [6]byte
	rand.Read(b[:]) // never fails since Go 1.24
	return hex.EncodeToString(b[:])
}

// render is the readable text block of a result: a status line, one line per
// abnormal condition, both streams under fixed headers, then the files, if
// any (images[i] says whether out.Files[i] went back as an image). The same
// result always renders to the same text.
func render(out execOutput, images []bool, timeout time.Duration, maxOutput int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d (duration %d ms)\n", out.ExitCode, out.DurationMS)
	if out.TimedOut {
		fmt.Fprintf(&b, "timed_out: true (killed at the %s s limit)\n", seconds(timeout))
	}
	if out.OOMKilled {
		b.WriteString("oom_killed: true (killed for running out of memory)\n")
	}
	if out.Truncated {
		fmt.Fprintf(&b, "truncated: true (stdout and stderr together exceeded %s; the rest was dropped)\n", size(maxOutput))
	}
	section(&b, "stdout", out.Stdout)
	section(&b, "stderr", out.Stderr)
	filesSection(&b, out.Files, images)
	return strings.TrimSuffix(b.String(), "\n")
}

// filesSection lists the files left in /tmp/outputs, if any: one line each,
// saying how it comes back or why it does not.
func filesSection(b *strings.Builder, files []fileInfo, images []bool) {
	if len(files) == 0 {
		return
	}
	fmt.Fprintf(b, "--- files in %s (%d) ---\n", launcher.OutputDir, len(files))
	for i, f := range files {
		name := f.Name
		if !isPlainName(name) {
			name = strconv.Quote(name)
		}
		switch {
		case !f.Returned:
			fmt.Fprintf(b, "%s (%d bytes): NOT returned: %s\n", name, f.Size, f.Reason)
		case i < len(images) && images[i]:
			fmt.Fprintf(b, "%s (%s, %d bytes): returned as an image\n", name, f.MIMEType, f.Size)
		default:
			fmt.Fprintf(b, "%s (%s, %d bytes): returned as a resource\n", name, f.MIMEType, f.Size)
		}
	}
}

// isPlainName reports whether a name reads unambiguously unquoted: printable,
// no spaces at its ends, nothing that looks like the text's own punctuation.
func isPlainName(s string) bool {
	if s == "" || strings.TrimSpace(s) != s || strings.ContainsAny(s, "\"()") {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

func section(b *strings.Builder, name, s string) {
	if s == "" {
		fmt.Fprintf(b, "--- %s (empty) ---\n", name)
		return
	}
	fmt.Fprintf(b, "--- %s ---\n%s", name, s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

// newOutput is the structured result of res, whose files outputFiles described.
func newOutput(res launcher.Result, files []fileInfo) execOutput {
	return execOutput{
		Stdout:     res.Stdout,
		Stderr:     res.Stderr,
		ExitCode:   res.ExitCode,
		DurationMS: res.Duration.Milliseconds(),
		Truncated:  res.Truncated,
		TimedOut:   res.TimedOut,
		OOMKilled:  res.OOMKilled,
		Files:      files,
	}
}

// Structured is the tool's structured result for res, the value a tools/call
// returns as structuredContent (files described, their contents not included), for
// other front ends of the same launcher (`mcp-exec run --json`).
func Structured(res launcher.Result) any {
	_, files, _ := outputFiles(res.Files)
	return newOutput(res, files)
}
