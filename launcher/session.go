package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/wire"
)

// Session states, as a session's exec reports them (Result.SessionState).
const (
	// SessionKept: the call ended by itself (an exception included); the session
	// holds what the call left, variables and imports.
	SessionKept = "kept"
	// SessionRolledBack: the call was killed (timeout, cancel, OOM, or it killed
	// itself); the interpreter is as it was before the call. Files are not rolled back.
	SessionRolledBack = "rolled_back"
	// SessionLost: the interpreter is gone; the next call starts an empty one.
	SessionLost = "lost"
)

// LabelSessionExpires marks a session's sandbox with the Unix time (seconds) at which
// its maximum lifetime ends. It never carries the session's handle.
const LabelSessionExpires = "dev.mcp-exec.session-expires"

// The session errors a store and a session share: launcher/backend's, so that a
// backend's session store (launcher/kube) returns them without importing the launcher.
var (
	ErrSessionBusy = backend.ErrSessionBusy
	ErrSessionGone = backend.ErrSessionGone
)

// GoneError is ErrSessionGone with why the session ended (backend.GoneError).
type GoneError = backend.GoneError

// ErrSessionClosed: the session was closed.
var ErrSessionClosed = errors.New("the session is closed")

// ErrSessionEgress: a job in a session named an egress profile; a session's profile
// is fixed when it is opened (SessionOptions.Egress).
var ErrSessionEgress = errors.New("a call in a session cannot name an egress profile: the session's profile is fixed when it is created")

// SessionOptions configure one session.
type SessionOptions struct {
	// Expires is when the session's maximum lifetime ends; it goes in a label
	// (LabelSessionExpires). The launcher does not enforce it: the caller closes.
	Expires time.Time
	// Memory is the session sandbox's memory (and swap) limit in bytes; 0 is the
	// launcher's Memory.
	Memory int64
	// Egress names the egress profile of every call in the session; ""
	// (the default): no network, as for a one-shot job without one. Its channel is
	// opened with the session's sandbox and closed with it (egress.go).
	Egress string
	// Audit names the session in the egress audit log of its channels.
	Audit backend.AuditLabel
	// Labels and Annotations are added to the sandbox's (metadata, never caller data).
	Labels, Annotations map[string]string
}

// Session is one sandbox that keeps a Python interpreter across calls: boot.py's
// session mode. Each Exec runs in a fork of the interpreter that becomes the session's
// state only when it ends by itself; a killed call leaves the state from before it.
// One call runs at a time (a second gets ErrSessionBusy). It holds an execution slot
// only while a call runs. Close removes its sandbox; so does the launcher's Close.
type Session struct {
	l    *Launcher
	opts SessionOptions

	run    sync.Mutex // held by the call in flight: TryLock or ErrSessionBusy
	mu     sync.Mutex // guards sb and closed
	sb     *sandbox   // nil: none yet, or lost; the next call starts one
	sw     *switchWriter
	ch     *egressChannel // sb's egress channel; nil without a profile
	closed bool
}

// SessionSpec is the spec of a session's sandbox: SpecOf with the session command,
// its memory and the expiry label.
func SessionSpec(o Options, so SessionOptions) backend.Spec {
	o = o.withDefaults()
	spec := SpecOf(o)
	spec.Command = append(spec.Command[:4:4], "session")
	spec.Command = append(spec.Command, bootCommand(o)[5:]...)
	if so.Memory > 0 {
		spec.Memory = so.Memory
	}
	if !so.Expires.IsZero() {
		spec.Labels[LabelSessionExpires] = strconv.FormatInt(so.Expires.Unix(), 10)
	}
	for k, v := range so.Labels {
		if _, own := spec.Labels[k]; !own {
			spec.Labels[k] = v
		}
	}
	if len(so.Annotations) > 0 {
		spec.Annotations = maps.Clone(so.Annotations)
	}
	return spec
}

// OpenSession starts a session's sandbox and waits until its interpreter is ready
// (its preload imported). Sessions are not supported by every backend: the caller
// decides (see docs/sessions.md).
func (l *Launcher) OpenSession(ctx context.Context, so SessionOptions) (*Session, error) {
	if !l.enter() {
		return nil, ErrClosed
	}
	defer l.runs.Done()
	return l.openSession(ctx, so)
}

// openSession is OpenSession's body, inside l.enter.
func (l *Launcher) openSession(ctx context.Context, so SessionOptions) (*Session, error) {
	s := &Session{l: l, opts: so}
	if taken, err := s.fromPool(ctx); taken || err != nil { // sessionpool.go
		if err != nil {
			return nil, l.closedOr(err)
		}
		return s, nil
	}
	if err := s.ensure(ctx); err != nil {
		return nil, l.closedOr(err)
	}
	l.sessStats.cold.Add(1)
	return s, nil
}

// ensure starts the session's sandbox if it has none. It is called with s.run held
// (or before the session is returned).
func (s *Session) ensure(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrSessionClosed
	}
	if s.sb != nil {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	sw := &switchWriter{}
	sb, ch, err := s.l.startSession(ctx, SessionSpec(s.l.opts, s.opts), s.opts, sw)
	if err != nil {
		return err
	}
	select {
	case <-sb.dec.ready:
	case <-sb.streamDone:
		s.l.dispose(sb)
		ch.end()
		return sb.brokenErr(errNoReady)
	case <-ctx.Done():
		s.l.dispose(sb)
		ch.end()
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // closed while starting
		s.l.dispose(sb)
		ch.end()
		return ErrSessionClosed
	}
	s.sb, s.sw, s.ch = sb, sw, ch
	return nil
}

// Close removes the session's sandbox. It does not wait for a call in flight, which
// ends with its sandbox gone. Closing twice is fine.
func (s *Session) Close() {
	s.mu.Lock()
	sb, ch := s.sb, s.ch
	s.sb, s.ch, s.closed = nil, nil, true
	s.mu.Unlock()
	if sb != nil {
		s.l.dispose(sb)
	}
	ch.end() // after dispose: the sandbox is no longer fed, its connections end here
}

// lose drops sb (the interpreter is gone or its stream cannot be trusted): the next
// call starts a new sandbox.
func (s *Session) lose(sb *sandbox) {
	var ch *egressChannel
	s.mu.Lock()
	if s.sb == sb {
		s.sb, ch, s.ch = nil, s.ch, nil
	}
	s.mu.Unlock()
	s.l.dispose(sb)
	ch.end() // the next sandbox gets a channel of its own
}

// Exec runs job in the session. As Run, a program that fails, times out or is killed
// for memory is a Result; Result.SessionState says what the session kept. A job with
// Tools gets them for this call alone, as a one-shot job does (cell).
func (s *Session) Exec(ctx context.Context, job Job) (Result, error) {
	if err := sessionJob(job); err != nil {
		return Result{}, err
	}
	if !s.run.TryLock() {
		return Result{}, ErrSessionBusy
	}
	defer s.run.Unlock()
	return s.l.call(ctx, job, s.exec)
}

// sessionJob refuses what a session's call cannot have, held or attached: an egress
// profile of its own, a language the bootstrap does not know, tools for a call that is
// neither Python nor JavaScript.
func sessionJob(job Job) error {
	if job.Egress != "" {
		return ErrSessionEgress
	}
	return job.checkLanguage()
}

// exec is Exec's body, inside Launcher.call.
func (s *Session) exec(ctx context.Context, job Job) (res Result, err error) {
	l := s.l
	t0 := time.Now()
	if err := s.ensure(ctx); err != nil {
		return Result{}, l.closedOr(err)
	}
	take := time.Since(t0)
	s.mu.Lock()
	sb, sw, ch := s.sb, s.sw, s.ch
	s.mu.Unlock()
	if sb == nil {
		return Result{}, ErrSessionClosed
	}
	if ch != nil {
		ch.ResetCaps() // the profile's caps count per call
	}
	res, err = s.cell(ctx, sb, sw, job)
	res.Timing.Take, res.Timing.Warm = take, true
	// A cancelled call that was rolled back leaves a usable interpreter; any other
	// error leaves a stream that cannot be trusted.
	kept := res.SessionState == SessionKept || res.SessionState == SessionRolledBack || (res.SessionState == SessionLost && !res.SessionGone())
	if res.SessionGone() || (err != nil && !(kept && errors.Is(err, context.Canceled))) {
		s.lose(sb)
		res.SessionState, res.LostLanguage = SessionLost, ""
	}
	return res, l.closedOr(err)
}

// cell runs one call on sb's interpreter, on the exec path (sandbox.run).
//
// With Tools, the call has a bridge of its own, as a one-shot exec does: its budget,
// its approvals, its context. The bootstrap gives the call's cell pipes that it closes
// when the call ends (boot.py), so a thread or process an earlier call left behind
// cannot reach this call's bridge, nor this one's reach a later one's: its calls fail
// in the sandbox. Replies that come after the call's end are dropped by the bootstrap.
func (s *Session) cell(ctx context.Context, sb *sandbox, sw *switchWriter, job Job) (Result, error) {
	sb.out = newCapture(s.l.opts.MaxOutputBytes)
	sb.dec = newDecoder(sb.out, s.l.opts.MaxFileBytes)
	c := sessionCall{s: s, sb: sb, job: job, w: &lockedWriter{w: sb.conn}, wrote: make(chan struct{})}
	var stopCalls context.CancelFunc
	if job.Tools != nil {
		var cctx context.Context
		cctx, stopCalls = callContext(ctx, job.Timeout)
		c.br = newBridge(cctx, job.Tools)
		defer c.br.wg.Wait() // every call has ended (and is recorded) when the result returns
		defer stopCalls()    // the call's end cancels its calls upstream
		sb.dec.SetCalls(c.br.calls)
	}
	sw.set(sb.dec)
	res, err := sb.run(ctx, job, c)
	res.Timing.Deliver = sb.deliverTime
	if c.br != nil && !res.SessionGone() {
		// The next call's request must not meet a reply of this one on the stream.
		stopCalls()
		select {
		case <-c.wrote:
		case <-time.After(interruptWait):
			res.SessionState = SessionLost
		}
	}
	return res, err
}

// sessionCall is a session's call on sandbox.run: the MCPEXECS request, or MCPEXECT
// with tools (no half-close: the stream carries the next calls), and ends that say what
// the session kept.
type sessionCall struct {
	s     *Session
	sb    *sandbox
	job   Job
	br    *bridge       // nil without tools
	w     *lockedWriter // sb.conn, shared by the replies and a kill
	wrote chan struct{} // closed when deliver has returned
}

func (c sessionCall) deliver(delivered chan<- error) {
	defer close(c.wrote)
	files := encodeFiles(c.job.Files)
	head := wire.CellHeader(len(c.job.Code), len(files), len(c.job.Stdin))
	if !c.job.python() {
		head = wire.CellLanguageHeader(c.job.Language, len(c.job.Code), len(files), len(c.job.Stdin))
	}
	var tools []byte
	if c.br != nil {
		tools = toolsBlob(c.job)
		head = wire.CellToolsHeader(len(c.job.Code), len(files), len(tools), len(c.job.Stdin))
		if !c.job.python() {
			head = wire.CellToolsLanguageHeader(c.job.Language, len(c.job.Code), len(files), len(tools), len(c.job.Stdin))
		}
	}
	_, err := io.WriteString(c.w, head+c.job.Code)
	for _, b := range [][]byte{files, tools, []byte(c.job.Stdin)} {
		if err == nil {
			_, err = c.w.Write(b)
		}
	}
	delivered <- err
	if err == nil && c.br != nil {
		c.br.writeReplies(c.w, c.sb.dec.done, nil)
	}
}

// lockedWriter serializes a call's writes to its sandbox's stream: the replies to its
// tool calls, and a kill, each whole.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (c sessionCall) noun() string { return "session sandbox" }

// undelivered: part of a call may be on the stream, which is no longer usable.
func (c sessionCall) undelivered(err error) (Result, error) {
	return Result{SessionState: SessionLost}, err
}

func (c sessionCall) ended(d time.Duration) (Result, error) { return c.s.ended(c.sb, d) }

// vanished: the whole sandbox went (under gVisor, an allocation far beyond the limit
// ends it: docs/sessions.md), and the interpreter with it.
func (c sessionCall) vanished(ctx context.Context, d time.Duration) (Result, error) {
	res, err := c.sb.vanished(ctx, d)
	res.SessionState = SessionLost
	res.Stderr = appendNote(res.Stderr, lostNote)
	return res, err
}

func (c sessionCall) timedOut(ctx context.Context, d time.Duration) (Result, error) {
	res, err := c.s.interrupt(ctx, c.sb, c.w, wire.Kill, d)
	res.TimedOut = res.SessionState != SessionKept
	return res, err
}

// canceled: the caller went away. The call is killed so that the next one finds the
// session free, and the context's error reported. Its result reaches no one: the kill
// (wire.Cancel) has the bootstrap say what it lost in the session's next JavaScript
// call, on whichever replica serves it.
func (c sessionCall) canceled(ctx context.Context, d time.Duration) (Result, error) {
	res, _ := c.s.interrupt(ctx, c.sb, c.w, wire.Cancel, d)
	return res, ctx.Err()
}

// ended builds the result of a call from its exit frame.
func (s *Session) ended(sb *sandbox, d time.Duration) (Result, error) {
	res, err := sb.finished(d)
	if err != nil {
		return Result{SessionState: SessionLost}, err
	}
	st, _, _ := sb.dec.Outcome()
	res.SessionState = st.State
	switch res.SessionState {
	case SessionKept, SessionRolledBack, SessionLost:
	default:
		return Result{SessionState: SessionLost}, fmt.Errorf("%w: session sandbox %s: exit frame without a session state", ErrSandbox, shortID(sb.id))
	}
	switch {
	case res.SessionState == SessionLost && st.Scope == "javascript" && st.LostBefore:
		res.LostLanguage = st.Scope
		res.Stderr = appendNote(res.Stderr, lostJavaScriptBeforeNote)
	case res.SessionState == SessionLost && st.Scope == "javascript" && st.Signal == 0:
		res.LostLanguage = st.Scope
		res.Stderr = appendNote(res.Stderr, lostJavaScriptExitNote)
	case res.SessionState == SessionLost && st.Scope == "javascript":
		res.LostLanguage = st.Scope
		res.Stderr = appendNote(res.Stderr, lostJavaScriptNote)
	case res.SessionState == SessionLost:
		res.Stderr = appendNote(res.Stderr, lostNote)
	}
	return res, nil
}

// lostNote ends the stderr of a call that lost its session.
const lostNote = "[mcp-exec] the session's interpreter was lost: its variables are gone; the next call starts an empty one (files in /tmp too)\n"

// lostJavaScriptNote ends the stderr of a call that lost the session's JavaScript state
// alone (a killed JavaScript call: a node process cannot be forked to roll it back).
const lostJavaScriptNote = "[mcp-exec] the session's JavaScript state was lost (its node process ended with the call); the next JavaScript call starts a fresh one; Python's and bash's state and the files in /tmp are as they were\n"

// lostJavaScriptExitNote ends the stderr of a JavaScript call during which node exited
// by itself (process.exit: no signal). The call's code need not be the cause: node runs
// only during calls, so a timer or callback an earlier call left unref'd (which did not
// hold that call) runs in a later call that waits on something.
const lostJavaScriptExitNote = "[mcp-exec] the session's JavaScript state was lost (its node process exited during the call: process.exit, called by this call's code or by a timer or callback an earlier JavaScript call left unref'd, which runs when a later call waits); the next JavaScript call starts a fresh one; Python's and bash's state and the files in /tmp are as they were\n"

// lostJavaScriptBeforeNote ends the stderr of a JavaScript call that found the session's
// node gone: it ended, or was stopped, between calls (another call killed it), or with
// a cancelled call whose result no one got; this call ran in a fresh one.
const lostJavaScriptBeforeNote = "[mcp-exec] the session's JavaScript state was lost before this call (its node process ended between calls, or with a cancelled call); this call ran in a fresh one; Python's and bash's state and the files in /tmp are as they were\n"

// interruptWait bounds how long a killed call's exit frame may take before the whole
// sandbox goes (and the session is lost).
const interruptWait = 5 * time.Second

// interrupt asks the bootstrap to kill the running call (every process but PID 1 and
// the holder) with kill (wire.Kill or wire.Cancel) and waits for its exit frame. If
// none comes, the sandbox goes.
func (s *Session) interrupt(ctx context.Context, sb *sandbox, w io.Writer, kill string, d time.Duration) (Result, error) {
	_, werr := io.WriteString(w, kill)
	if werr == nil {
		select {
		case <-sb.dec.done:
			return s.ended(sb, d)
		case <-sb.streamDone:
		case <-time.After(interruptWait):
		}
	}
	res, err := sb.timedOut(ctx, d)
	res.SessionState = SessionLost
	res.Stderr = appendNote(res.Stderr, "[mcp-exec] the session's interpreter did not survive the kill: its variables are gone; the next call starts an empty one (files in /tmp too)\n")
	return res, err
}

func appendNote(stderr, note string) string {
	if stderr != "" && !strings.HasSuffix(stderr, "\n") {
		return stderr + "\n" + note
	}
	return stderr + note
}

// switchWriter carries a session sandbox's stdout stream to the decoder of the call
// in flight. Frames outside a call (the bootstrap writes none) are dropped.
type switchWriter struct {
	mu  sync.Mutex
	cur *decoder
}

func (w *switchWriter) set(d *decoder) {
	w.mu.Lock()
	w.cur = d
	w.mu.Unlock()
}

func (w *switchWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(p) > 0 && w.cur != nil {
		p = p[w.cur.Feed(p):]
		if w.cur.Finished() {
			w.cur = nil
		}
	}
	return n, nil
}
