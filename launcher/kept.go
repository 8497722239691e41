package launcher

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/wire"
)

// Kept calls: a background run on a backend whose replicas share the sandboxes
// (Kubernetes). The run is the one call of an attached session's sandbox (OpenAttached),
// sent with wire.KeptHeader: the bootstrap runs it on when this launcher detaches, kills
// it itself at its timeout, and keeps its frames (output, files, exit) in the sandbox's
// memory, where any launcher attaching to the sandbox fetches them (Fetch), as often as
// it likes, until the sandbox is removed. Nothing of the call's is held by a launcher
// between two attaches, so a replica's restart loses no run.

// ErrKeptTools: a kept call cannot have tools or an egress profile: the bridge and the
// channel would live in the launcher that started it, which detaches.
var ErrKeptTools = errors.New("a background run on this backend cannot call upstream tools or use an egress profile: their bridge would be served by one replica only")

// fetchWait bounds how long one Fetch waits for the bootstrap's answer: a sandbox
// under load answers in milliseconds; one that does not is reported, not waited on.
const fetchWait = 20 * time.Second

// KeptProgress is a running kept call's progress: its output's tails and size so far.
type KeptProgress = Progress

// Keep starts job as the kept call of a's sandbox and detaches. It returns once the
// bootstrap has the whole call (it has answered a fetch): from then on the call runs
// without any launcher. job.Timeout (0: the launcher's default) is enforced by the
// bootstrap.
func (a *AttachedSession) Keep(ctx context.Context, job Job) error {
	if job.Tools != nil || job.Egress != "" {
		return ErrKeptTools
	}
	if err := job.checkLanguage(); err != nil {
		return err
	}
	if job.Timeout <= 0 {
		job.Timeout = a.l.opts.DefaultTimeout
	}
	files := encodeFiles(job.Files)
	_, _, _, err := a.exchange(ctx, func(w io.Writer) error {
		h := wire.KeptHeader(len(job.Code), len(files), len(job.Stdin), job.Timeout.Milliseconds())
		if !job.python() {
			h = wire.KeptLanguageHeader(job.Language, len(job.Code), len(files), len(job.Stdin), job.Timeout.Milliseconds())
		}
		_, err := io.WriteString(w, h+job.Code)
		for _, b := range [][]byte{files, []byte(job.Stdin), []byte(wire.Fetch)} {
			if err == nil {
				_, err = w.Write(b)
			}
		}
		return err
	})
	return err
}

// Fetch attaches to a's sandbox and asks for its kept call: while the call runs, its
// progress (done false); once it has ended, its result (done true), as the call would
// have returned it (Duration from the code's delivery to its end).
func (a *AttachedSession) Fetch(ctx context.Context) (res Result, p KeptProgress, done bool, err error) {
	return a.exchange(ctx, func(w io.Writer) error {
		_, err := io.WriteString(w, wire.Fetch)
		return err
	})
}

// Kill attaches and kills a's running kept call (as a session's call is killed); its
// result, which says so, stays kept. A call that has ended is left as it is.
func (a *AttachedSession) Kill(ctx context.Context) (Result, KeptProgress, bool, error) {
	return a.exchange(ctx, func(w io.Writer) error {
		_, err := io.WriteString(w, wire.Kill+wire.Fetch)
		return err
	})
}

// exchange attaches, writes what send writes, reads the answer to its fetch, and
// detaches.
func (a *AttachedSession) exchange(ctx context.Context, send func(io.Writer) error) (Result, KeptProgress, bool, error) {
	l := a.l
	if !l.enter() {
		return Result{}, Progress{}, false, ErrClosed
	}
	defer l.runs.Done()
	out := newCapture(l.opts.MaxOutputBytes)
	sb := &sandbox{l: l, id: a.id, out: out, dec: newDecoder(out, l.opts.MaxFileBytes), diag: &limitedBuffer{max: 4096}}
	conn, err := l.be.(Reattacher).Reattach(ctx, a.id, sb.dec, sb.diag)
	if err != nil {
		return Result{}, Progress{}, false, l.backendErr("attaching to the run's sandbox", err)
	}
	defer func() { conn.Close(); <-conn.Done() }()
	if err := send(conn); err != nil {
		return Result{}, Progress{}, false, l.backendErr("writing to the run's sandbox", err)
	}
	t := time.NewTimer(fetchWait)
	defer t.Stop()
	select {
	case <-sb.dec.done:
	case <-conn.Done():
		select {
		case <-sb.dec.done:
		default:
			return Result{}, Progress{}, false, l.backendErr("reading the run's sandbox", errors.New("its stream ended before it answered"))
		}
	case <-t.C:
		return Result{}, Progress{}, false, l.backendErr("reading the run's sandbox", errors.New("no answer within "+fetchWait.String()))
	case <-ctx.Done():
		return Result{}, Progress{}, false, ctx.Err()
	}
	st, _, _ := sb.dec.Outcome()
	if st != nil && st.Running {
		p := out.progress()
		p.OutputBytes = st.OutputBytes
		return Result{}, p, false, nil
	}
	res, err := sb.finished(0)
	if err != nil {
		return Result{}, Progress{}, false, err
	}
	res.TimedOut, res.Duration = st.TimedOut, time.Duration(st.DurationMs)*time.Millisecond
	return res, Progress{}, true, nil
}
