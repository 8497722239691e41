package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/wire"
)

// sandbox is one started container whose streams are attached, waiting for its code.
//
// A job's path through one: Backend.Create, then Backend.Start with the streams
// attached before anything runs (no output is lost); the bootstrap's ready frame (a
// warm pool keeps sandboxes here); the header, the code and the files (launcher/wire),
// then the timeout starts; stdin, then the half-close (with Job.Tools the tools go with
// the code, and replies to the program's calls come before the half-close, until the
// program's end: bridge.go); frames until the exit frame, the timeout (Backend.Kill:
// every process of the program dies with the sandbox), the stream's end without an
// exit frame (Backend.Inspect says how it ended) or the caller's cancellation; then
// Backend.Remove in the background.
type sandbox struct {
	l    *Launcher
	id   string
	conn backend.Conn
	out  *capture
	dec  *decoder
	diag *limitedBuffer // the bootstrap's own stderr, for deployers' error messages
	// streamDone is closed when the attached streams end: the sandbox has exited or
	// the connection was closed.
	streamDone <-chan struct{}
	// How long the backend's create and start took, and the code's delivery (Timing).
	createTime, startTime, deliverTime time.Duration
	born                               time.Time     // just before the create: a pooled sandbox's age counts from it
	sw                                 *switchWriter // a session sandbox's stdout: its calls' decoders
	expires                            time.Time     // a pooled session sandbox's expiry label, as a time
}

// start creates and starts a sandbox with its streams attached.
func (l *Launcher) start(ctx context.Context) (_ *sandbox, err error) {
	return l.startSpec(ctx, SpecOf(l.opts), nil)
}

// startPooled starts a warm-pool sandbox (pooledSpec).
func (l *Launcher) startPooled(ctx context.Context) (*sandbox, error) {
	return l.startSpec(ctx, pooledSpec(l.opts), nil)
}

// startSpec starts a sandbox from spec. With sw set (a session), the stdout stream
// goes through sw, whose first decoder is the sandbox's.
func (l *Launcher) startSpec(ctx context.Context, spec backend.Spec, sw *switchWriter) (_ *sandbox, err error) {
	l.watchOrphans()
	t0 := time.Now()
	born := t0
	id, err := l.be.Create(ctx, spec)
	created := time.Since(t0)
	if err != nil {
		if errors.Is(err, ErrImageMissing) {
			return nil, fmt.Errorf("creating sandbox: %w", err)
		}
		return nil, l.backendErr("creating sandbox", err)
	}
	l.opts.Metrics.ContainerCreated()
	l.track(id)
	sb := &sandbox{l: l, id: id, diag: &limitedBuffer{max: 4096}, createTime: created, born: born, sw: sw}
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			l.log.Debug().Err(err).Str("container_id", shortID(sb.id)).Msg("start failed; removing")
			if rmErr := l.remove(ctx, sb.id); rmErr != nil {
				err = errorsJoin(err, rmErr)
				l.removeLater(sb.id)
			}
		}
	}()

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sb.out = newCapture(l.opts.MaxOutputBytes)
	sb.dec = newDecoder(sb.out, l.opts.MaxFileBytes)
	var stdout io.Writer = sb.dec
	if sw != nil {
		sw.set(sb.dec)
		stdout = sw
	}
	t0 = time.Now()
	conn, err := l.be.Start(ctx, sb.id, stdout, sb.diag)
	sb.startTime = time.Since(t0)
	if err != nil {
		l.opts.Metrics.EngineError()
		return nil, err
	}
	sb.conn, sb.streamDone = conn, conn.Done()
	l.log.Debug().Str("container_id", shortID(sb.id)).Msg("sandbox started")
	return sb, nil
}

// alive reports whether the sandbox is still running and has not been used.
func (sb *sandbox) alive() bool { return !closed(sb.streamDone) && !sb.dec.Finished() }

// exec delivers the job and waits for the program's end, the timeout, or ctx.
func (sb *sandbox) exec(ctx context.Context, job Job) (Result, error) {
	var br *bridge
	if job.Tools != nil {
		cctx, cancel := callContext(ctx, job.Timeout)
		br = newBridge(cctx, job.Tools)
		defer br.wg.Wait() // every call has ended (and is recorded) when the result returns
		defer cancel()     // the exec's end cancels its calls upstream
		sb.dec.SetCalls(br.calls)
	}
	return sb.run(ctx, job, oneShot{sb: sb, job: job, br: br})
}

// A call is what differs between a one-shot exec (oneShot) and a session's call
// (sessionCall) on the one path that runs both, sandbox.run: how the request is written,
// and what each way of ending makes of the result.
type call interface {
	// deliver writes the request and reports on delivered once the code is in.
	deliver(delivered chan<- error)
	// noun names the sandbox in errors.
	noun() string
	// undelivered is the result when the request is not in (err says why).
	undelivered(err error) (Result, error)
	// ended: an X or F frame came. vanished: the stream ended without one.
	ended(d time.Duration) (Result, error)
	vanished(ctx context.Context, d time.Duration) (Result, error)
	// timedOut: the job's timeout passed. canceled: ctx ended first.
	timedOut(ctx context.Context, d time.Duration) (Result, error)
	canceled(ctx context.Context, d time.Duration) (Result, error)
}

// run delivers c's request, then waits for the end of the program, its timeout (started
// once the code is in), or ctx, reporting progress on the way.
func (sb *sandbox) run(ctx context.Context, job Job, c call) (Result, error) {
	sb.deliverTime = 0
	delivered := make(chan error, 1)
	t0 := time.Now()
	go c.deliver(delivered)

	select {
	case err := <-delivered:
		if err != nil {
			// The sandbox may have died before reading its code: say why if it did.
			return c.undelivered(sb.brokenErr(fmt.Errorf("sending code: %w", err)))
		}
		sb.deliverTime = time.Since(t0)
	case <-sb.streamDone:
		return c.undelivered(sb.brokenErr(errors.New(c.noun() + " ended before its code was delivered")))
	case <-ctx.Done():
		return c.undelivered(ctx.Err())
	}

	began := time.Now()
	timer := time.NewTimer(job.Timeout)
	defer timer.Stop()
	var tick <-chan time.Time
	if job.Progress != nil {
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		if res, done, err := sb.wait(ctx, c, began, timer.C, tick, job); done {
			return res, err
		}
	}
}

// progressInterval bounds the rate of progress reports.
const progressInterval = time.Second

// wait waits for one event; done is false after a progress report.
func (sb *sandbox) wait(ctx context.Context, c call, began time.Time, timeout, tick <-chan time.Time, job Job) (Result, bool, error) {
	var res Result
	var err error
	select {
	case <-tick:
		pr := sb.out.progress()
		pr.Elapsed = time.Since(began)
		job.Progress(pr)
		return Result{}, false, nil
	case <-sb.dec.done:
		res, err = c.ended(time.Since(began))
	case <-sb.streamDone:
		if sb.dec.Finished() {
			res, err = c.ended(time.Since(began))
		} else {
			res, err = c.vanished(ctx, time.Since(began))
		}
	case <-timeout:
		res, err = c.timedOut(ctx, time.Since(began))
	case <-ctx.Done():
		res, err = c.canceled(ctx, time.Since(began))
	}
	return res, true, err
}

// oneShot is a one-shot exec's call: the sandbox's only one.
type oneShot struct {
	sb  *sandbox
	job Job
	br  *bridge // nil without tools
}

func (o oneShot) deliver(delivered chan<- error) { o.sb.deliver(o.job, o.br, delivered) }

func (o oneShot) noun() string { return "sandbox" }

func (o oneShot) undelivered(err error) (Result, error) { return Result{}, err }

func (o oneShot) ended(d time.Duration) (Result, error) { return o.sb.finished(d) }

func (o oneShot) vanished(ctx context.Context, d time.Duration) (Result, error) {
	return o.sb.vanished(ctx, d)
}

func (o oneShot) timedOut(ctx context.Context, d time.Duration) (Result, error) {
	return o.sb.timedOut(ctx, d)
}

func (o oneShot) canceled(ctx context.Context, _ time.Duration) (Result, error) {
	return Result{}, ctx.Err()
}

// deliver writes the code header and code, reports delivery, then writes stdin and
// half-closes the stream so that the program sees end of file. A program need not read
// its stdin, so the result never waits for this goroutine; closing the connection
// (dispose) ends it.
//
// With tools (br not nil) the stream stays open after stdin for the replies to the
// program's calls, until the program ends.
func (sb *sandbox) deliver(job Job, br *bridge, delivered chan<- error) {
	w := sb.conn
	files := encodeFiles(job.Files)
	var tools []byte
	if br != nil {
		tools = toolsBlob(job)
	}
	if _, err := io.WriteString(w, header(job, files, tools)+job.Code); err != nil {
		delivered <- err
		return
	}
	for _, b := range [][]byte{files, tools} {
		if _, err := w.Write(b); err != nil {
			delivered <- err
			return
		}
	}
	delivered <- nil
	if job.Stdin != "" {
		if _, err := io.WriteString(w, job.Stdin); err != nil {
			return
		}
	}
	if br != nil {
		br.writeReplies(w, sb.dec.done, sb.conn.CloseWrite)
		return
	}
	_ = sb.conn.CloseWrite()
}

// encodeFiles frames the input files for the bootstrap: u32 name length, name, u32
// size, bytes; repeated.
func encodeFiles(files []File) []byte {
	var b []byte
	for _, f := range files {
		b = wire.AppendFile(b, f.Name, f.Data)
	}
	return b
}

// finished builds the result from the bootstrap's exit frame.
func (sb *sandbox) finished(d time.Duration) (Result, error) {
	st, fatal, err := sb.dec.Outcome()
	switch {
	case err != nil:
		return Result{}, fmt.Errorf("%w: reading sandbox %s: %w", ErrSandbox, shortID(sb.id), err)
	case fatal != "":
		return Result{}, fmt.Errorf("%w: bootstrap in sandbox %s: %s", ErrSandbox, shortID(sb.id), fatal)
	}
	if st.Dropped {
		sb.out.markTruncated()
	}
	stdout, stderr, truncated := sb.out.result()
	return Result{
		Stdout: stdout, Stderr: stderr, Truncated: truncated,
		ExitCode: st.Exit, Signal: st.Signal, OOMKilled: st.OOM,
		Duration: d, Files: outputFiles(sb.dec.Files()),
	}, nil
}

// timedOut kills the container, which ends every process the program started, and
// returns what the program wrote until then.
func (sb *sandbox) timedOut(ctx context.Context, d time.Duration) (Result, error) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := sb.l.be.Kill(kctx, sb.id); err != nil {
		sb.l.log.Warn().Err(err).Str("container_id", shortID(sb.id)).Msg("killing timed-out sandbox")
	}
	// Frames already in flight still count; wait briefly for the stream to end.
	select {
	case <-sb.streamDone:
	case <-time.After(2 * time.Second):
	}
	stdout, stderr, truncated := sb.out.result()
	return Result{
		Stdout: stdout, Stderr: stderr, Truncated: truncated,
		ExitCode: 128 + 9, Signal: 9, TimedOut: true, Duration: d,
	}, nil
}

// settleWait bounds how long vanished waits for the engine to see the end of a sandbox
// whose stream ended, before it takes the sandbox for one that still runs.
const settleWait = 5 * time.Second

// vanished handles a stream that ended without an exit frame: the container was
// killed from outside, the bootstrap died (for example OOM-killed itself), or the
// engine went away. The engine's record of the container says which.
func (sb *sandbox) vanished(ctx context.Context, d time.Duration) (Result, error) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	state, err := sb.l.be.Inspect(ictx, sb.id)
	// The stream can end before the engine records the end: the kubelet reports a
	// container's exit up to a relist later (about 1 s, more on a loaded node).
	for settle := time.Now().Add(settleWait); err == nil && state.Running && time.Now().Before(settle); {
		select {
		case <-ictx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		state, err = sb.l.be.Inspect(ictx, sb.id)
	}
	if err != nil {
		return Result{}, sb.l.backendErr(fmt.Sprintf("sandbox %s ended without a result; inspecting it", shortID(sb.id)), err)
	}
	if state.Running {
		// The engine dropped the streams of a sandbox that still runs: it restarted
		// (Podman's service does not stop its containers) or the connection broke.
		return Result{}, fmt.Errorf("%w: lost the output stream of sandbox %s, which still runs",
			ErrEngineUnavailable, shortID(sb.id))
	}
	if diag := sb.diag.String(); diag != "" && !state.OOMKilled {
		return Result{}, sb.brokenErr(errors.New("bootstrap ended without a result"))
	}
	switch state.Code {
	case bootExitUsage, bootExitFailed:
		return Result{}, sb.brokenErr(fmt.Errorf("bootstrap failed (container exit code %d)", state.Code))
	}
	stdout, stderr, truncated := sb.out.result()
	note := fmt.Sprintf("[mcp-exec] the sandbox was stopped before the program reported its exit (container exit code %d", state.Code)
	if state.OOMKilled {
		note += ", killed for memory"
	}
	note += ")\n"
	if !strings.HasSuffix(stderr, "\n") && stderr != "" {
		note = "\n" + note
	}
	return Result{
		Stdout: stdout, Stderr: stderr + note, Truncated: truncated,
		ExitCode: state.Code, Signal: signalOf(state.Code), OOMKilled: state.OOMKilled,
		Duration: d,
	}, nil
}

func signalOf(exit int) int {
	if exit > 128 && exit < 128+65 {
		return exit - 128
	}
	return 0
}

// brokenErr explains a sandbox that broke its protocol, with the bootstrap's own
// stderr (never caller data: the program's stderr travels in frames).
func (sb *sandbox) brokenErr(err error) error {
	msg := strings.TrimSpace(sb.diag.String())
	if msg == "" {
		return fmt.Errorf("%w: sandbox %s: %w", ErrSandbox, shortID(sb.id), err)
	}
	return fmt.Errorf("%w: sandbox %s: %w; its bootstrap said: %s", ErrSandbox, shortID(sb.id), err, msg)
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	max int // set once

	mu  sync.Mutex // guards buf
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(len(p), room)]...)
	}
	b.mu.Unlock()
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
