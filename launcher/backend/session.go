package backend

import (
	"errors"
	"time"
)

// ErrSessionBusy: the session is running another call (on any server replica).
var ErrSessionBusy = errors.New("the session is busy with another call")

// ErrSessionGone: no open session has this handle for this identity: closed, expired,
// lost, another identity's, or never made. When the store knows why it ended, it
// returns a *GoneError instead.
var ErrSessionGone = errors.New("no open session has this session_id (it was closed, expired, or never existed)")

// GoneError is ErrSessionGone with why the session ended ("expired: it was idle for
// more than 30m0s", "closed by session_close"), when the store knows it: the server
// (replica) that ended a session remembers why for its owner's next call.
// errors.Is(err, ErrSessionGone) holds for it; errors.As gives Why, which never holds
// the handle.
type GoneError struct{ Why string }

func (e *GoneError) Error() string { return ErrSessionGone.Error() + ": " + e.Why }
func (e *GoneError) Unwrap() error { return ErrSessionGone }

// SessionRecord is what a session is, wherever it is kept (in a server's memory, or in
// its pod's annotations on Kubernetes): its clocks, its calls and whether one runs. It
// never holds the handle or the owner's identity. Due is the one rule that ends it.
type SessionRecord struct {
	Idle      time.Duration // the idle timeout, restarted by each call's end
	IdleUntil time.Time     // ends unless a call comes first
	Expires   time.Time     // the maximum lifetime's end
	// Lifetime is the maximum lifetime, for the reason given when it ends; 0 when the
	// store does not keep it (the reason then names no duration).
	Lifetime time.Duration
	Count    int  // calls claimed so far
	Busy     bool // a call runs
	// BusyUntil is when a running call's claim lapses (its server went away during
	// it); zero when the claim does not lapse (the server holds the call itself).
	BusyUntil time.Time
	Ended     bool // the session's sandbox has ended
}

// ExpiresAt is when the session ends if no call comes: its idle deadline or its maximum
// lifetime, the earlier.
func (r SessionRecord) ExpiresAt() time.Time {
	if r.IdleUntil.Before(r.Expires) {
		return r.IdleUntil
	}
	return r.Expires
}

// Due says why the session must end at now, "" if it need not. The texts reach the
// session's owner ("session expired: it was idle ...").
func (r SessionRecord) Due(now time.Time) string {
	switch {
	case r.Ended:
		return "ended: its interpreter's container ended"
	case !now.Before(r.Expires):
		if r.Lifetime > 0 {
			return "expired: it reached its maximum lifetime of " + r.Lifetime.String()
		}
		return "expired: it reached its maximum lifetime"
	case !r.Busy && !now.Before(r.IdleUntil):
		return "expired: it was idle for more than " + r.Idle.String()
	case r.Busy && !r.BusyUntil.IsZero() && !now.Before(r.BusyUntil):
		// The server that claimed the last call went away in it: the interpreter is
		// mid-call with nobody to end it. The session cannot be trusted.
		return "ended: the server replica running its last call went away during it"
	}
	return ""
}

// SessionClaim is a session claimed by one call, or by its creation until its sandbox
// runs: what its store gives the server that drives it, and takes back to release it.
// It holds the handle and the owner's identity in memory only; no store writes them.
type SessionClaim struct {
	Handle, Owner string
	Token         string // the claim's, for its release
	// Sandbox is the session's sandbox id; "" from Create and Restart until the server
	// has started one and set it.
	Sandbox string
	Record  SessionRecord // the session as claimed: Count includes this call
	Memory  int64         // the sandbox's memory limit in bytes, where the store keeps it; 0 if not
	// Labels and Annotations, from Create and Restart, go on the sandbox to start (on
	// Kubernetes the pod is the record: its labels find it, its annotations are it).
	Labels, Annotations map[string]string
	// StartBy, from Create and Restart, is when the creation's claim lapses if its
	// sandbox is not ready; zero: it does not lapse.
	StartBy time.Time
}
