package launcher

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Attached sessions: a session's sandbox that any launcher on the same backend may
// serve (Kubernetes: every replica of the server), so that it is held by none. Once
// ready it is detached and no longer this launcher's (neither its shutdown nor its
// reaper removes it: backend.LabelSessionKey keeps it out of List); each call attaches
// to it anew. Its store (launcher/kube's SessionStore) decides who may call and when it
// ends; a Session, by contrast, is held by the launcher that opened it.

// ErrSharedEgress: an attached session asked for an egress profile. Its channel would
// live in the launcher that opened it, and the calls that other replicas serve could
// not use it.
var ErrSharedEgress = errors.New("a shared session cannot have an egress profile: its channel would be served by one replica only (run one replica, without shared sessions, for sessions with a profile)")

// Reattacher is a backend whose session sandboxes can be attached again, for one call
// at a time, by any launcher: Kubernetes (pods with stdinOnce false).
type Reattacher interface {
	Reattach(ctx context.Context, id string, stdout, stderr io.Writer) (backend.Conn, error)
}

// AttachedSession is a session's sandbox that this launcher attaches to for each call
// (OpenAttached made it here or on another replica). One call at a time runs through
// it; a lost interpreter ends it (its sandbox is removed): its store starts another.
type AttachedSession struct {
	l  *Launcher
	id string

	run    sync.Mutex // held by the call in flight: TryLock or ErrSessionBusy
	mu     sync.Mutex // guards closed
	closed bool
}

// OpenAttached starts an attached session's sandbox, waits until its interpreter is
// ready, and detaches from it. so.Labels must hold backend.LabelSessionKey (the
// store's key: without it the sandbox would be this instance's to reap), and the
// backend must be a Reattacher.
func (l *Launcher) OpenAttached(ctx context.Context, so SessionOptions) (*AttachedSession, error) {
	if !l.enter() {
		return nil, ErrClosed
	}
	defer l.runs.Done()
	if _, ok := l.be.(Reattacher); !ok || so.Labels[backend.LabelSessionKey] == "" {
		return nil, errors.New("a shared session needs a backend that reattaches (Kubernetes) and the session key label")
	}
	if so.Egress != "" {
		// The channel lives in this launcher's process: another replica serving a
		// call could not carry the session's connections.
		return nil, ErrSharedEgress
	}
	s, err := l.openSession(ctx, so)
	if err != nil {
		return nil, err
	}
	// Ready: detach. The sandbox is now the session's, served by whichever launcher
	// gets its next call (AttachSession).
	s.mu.Lock()
	sb := s.sb
	s.mu.Unlock()
	sb.conn.Close()
	<-sb.streamDone
	l.untrack(sb.id)
	return &AttachedSession{l: l, id: sb.id}, nil
}

// AttachSession returns the attached session whose sandbox is id (made by OpenAttached,
// by this launcher or another): each Exec attaches to it for its call. Close removes
// the sandbox.
func (l *Launcher) AttachSession(id string) *AttachedSession {
	return &AttachedSession{l: l, id: id}
}

// ID is the session's sandbox id.
func (a *AttachedSession) ID() string { return a.id }

// Exec runs job in the session, as Session.Exec does, attached for this call only.
func (a *AttachedSession) Exec(ctx context.Context, job Job) (Result, error) {
	if err := sessionJob(job); err != nil {
		return Result{}, err
	}
	if !a.run.TryLock() {
		return Result{}, ErrSessionBusy
	}
	defer a.run.Unlock()
	return a.l.call(ctx, job, a.exec)
}

// exec attaches, runs the call, and detaches. A lost interpreter ends the session (its
// sandbox is removed): the store that found the sandbox knows no other.
func (a *AttachedSession) exec(ctx context.Context, job Job) (Result, error) {
	l := a.l
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed || a.id == "" {
		return Result{}, ErrSessionClosed
	}
	t0 := time.Now()
	sw := &switchWriter{}
	sb := &sandbox{l: l, id: a.id, diag: &limitedBuffer{max: 4096}}
	conn, err := l.be.(Reattacher).Reattach(ctx, a.id, sw, sb.diag)
	if err != nil {
		return Result{}, l.backendErr("attaching to the session's sandbox", err)
	}
	sb.conn, sb.streamDone = conn, conn.Done()
	take := time.Since(t0)
	// One call on the interpreter is the same exchange as in a held session.
	res, err := (&Session{l: l}).cell(ctx, sb, sw, job)
	conn.Close()
	<-sb.streamDone
	res.Timing.Take, res.Timing.Warm = take, true
	kept := res.SessionState == SessionKept || res.SessionState == SessionRolledBack || (res.SessionState == SessionLost && !res.SessionGone())
	if res.SessionGone() || (err != nil && !(kept && errors.Is(err, context.Canceled))) {
		res.SessionState, res.LostLanguage = SessionLost, ""
		a.mu.Lock()
		a.closed = true
		a.mu.Unlock()
		a.remove()
	}
	return res, l.closedOr(err)
}

// Close removes the session's sandbox, in the background as dispose does. Closing twice
// is fine.
func (a *AttachedSession) Close() {
	a.mu.Lock()
	done := a.closed
	a.closed = true
	a.mu.Unlock()
	if !done && a.id != "" {
		a.remove()
	}
}

// remove removes the session's sandbox in the background (the launcher's Close waits).
func (a *AttachedSession) remove() {
	l, id := a.l, a.id
	l.cleanup.Add(1)
	go func() {
		defer l.cleanup.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := l.remove(ctx, id); err != nil {
			l.log.Warn().Err(err).Str("container_id", shortID(id)).Msg("removing a shared session's sandbox (its expiry will)")
		}
	}()
}
