package launcher

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"
)

// The session pool: session sandboxes started ahead of OpenSession, so that a session
// starts as fast as a warm one-shot exec does. A pooled session sandbox runs the
// bootstrap in session mode, its holder has imported the preload and forked its first
// cell, and no call has been sent to it: it holds no caller data and no handle (the
// launcher never has one). It serves exactly one session and is removed with it,
// never returned to the pool. The refill, the claims that keep a caller from starting
// a sandbox the pool would then throw away, the image check and the drain are the warm
// pool's (pool.go).
//
// The expiry label. An engine cannot change a container's labels after its create, so
// a pooled sandbox is labelled, at its create, with the end of the longest lifetime a
// session may have if it started then: its creation plus SessionPoolOptions.Lifetime.
// A session taken from the pool ends then (Session.Expires), never later, so the label
// is exactly its end, as a cold session's is; the lifetime it gets counts from the
// sandbox's creation, not from OpenSession. To keep that loss small, an idle pooled
// sandbox older than sessionPoolMaxAge(Lifetime) is removed and replaced: a session
// from the pool gets at least Lifetime less that age. An untaken pooled sandbox left by
// a server killed with SIGKILL is removed, like every sandbox of the instance, by the
// next start's Reap, and its label has never promised more than its lifetime.

// SessionPoolOptions configure the session pool. The zero value keeps none: every
// session starts its sandbox cold.
type SessionPoolOptions struct {
	// Size is the number of session sandboxes kept started; 0: none.
	Size int
	// Memory is their memory limit; a session asking for another limit starts cold.
	// 0 is Options.Memory.
	Memory int64
	// Lifetime is the sessions' maximum lifetime: a pooled sandbox's expiry label is
	// its creation plus Lifetime, and a session taken from it ends then. 0 is 1 h.
	Lifetime time.Duration
}

// sessionPoolMaxAge is how long a pooled session sandbox may wait for its session: a
// twelfth of the lifetime (5 min of 1 h), at least 10 s and at most 5 min, and never
// more than half the lifetime. Each replacement costs a container start (about 0.4
// CPU-seconds here): once per 5 min per pooled sandbox with the default lifetime.
func sessionPoolMaxAge(lifetime time.Duration) time.Duration {
	return min(max(lifetime/12, 10*time.Second), 5*time.Minute, lifetime/2)
}

// sessionStats counts the sessions opened, by where their sandbox came from.
type sessionStats struct {
	fromPool, cold atomic.Int64
}

func (o SessionPoolOptions) withDefaults(l Options) SessionPoolOptions {
	if o.Memory <= 0 {
		o.Memory = l.Memory
	}
	if o.Lifetime <= 0 {
		o.Lifetime = time.Hour
	}
	return o
}

// newSessionPool makes the session pool, or nil when its size is 0.
func newSessionPool(l *Launcher) *pool {
	o := l.opts.SessionPool
	if o.Size <= 0 {
		return nil
	}
	p := newPool(l, o.Size)
	p.name = "session pool"
	p.maxAge = sessionPoolMaxAge(o.Lifetime)
	p.spawn = l.startPooledSession
	return p
}

// startPooledSession starts one session sandbox for the pool, labelled with the end of
// the lifetime a session taken from it may have.
func (l *Launcher) startPooledSession(ctx context.Context) (*sandbox, error) {
	o := l.opts.SessionPool
	born := time.Now()
	expires := time.Unix(born.Add(o.Lifetime).Unix(), 0) // the label's own precision: never later than it says
	sw := &switchWriter{}
	sb, err := l.startSpec(ctx, SessionSpec(l.opts, SessionOptions{Expires: expires, Memory: o.Memory}), sw)
	if err != nil {
		return nil, err
	}
	sb.born, sb.expires = born, expires
	return sb, nil
}

// poolable reports whether a session with so can take a pooled sandbox: one that asks
// for nothing the pooled sandboxes were not made with. Any option besides the expiry
// and the memory (an egress channel, say, bound at create) makes it start cold.
func (l *Launcher) poolable(so SessionOptions) bool {
	if l.spool == nil {
		return false
	}
	// Every field of SessionOptions but Expires and Memory must be named here (a new
	// one sends the session cold until it is).
	if so.Egress != "" || len(so.Labels) > 0 || len(so.Annotations) > 0 {
		return false
	}
	mem := so.Memory
	if mem <= 0 {
		mem = l.opts.Memory
	}
	return mem == l.opts.SessionPool.Memory
}

// fromPool gives s a sandbox from the session pool if its options allow one (or a
// start of the pool's own that joins the pool if the session no longer needs it):
// taken reports whether it did; an error means it tried and failed. The session then
// ends at the sooner of its own expiry and the sandbox's label, and a sandbox it
// restarts after losing its interpreter carries that end too.
func (s *Session) fromPool(ctx context.Context) (taken bool, err error) {
	l := s.l
	if !l.poolable(s.opts) {
		return false, nil
	}
	sb, warm, err := l.spool.get(ctx)
	if err != nil {
		return true, err
	}
	select {
	case <-sb.dec.ready:
	case <-sb.streamDone:
		l.dispose(sb)
		return true, sb.brokenErr(errNoReady)
	case <-ctx.Done():
		l.dispose(sb)
		return true, ctx.Err()
	}
	if s.opts.Expires.IsZero() || sb.expires.Before(s.opts.Expires) {
		s.opts.Expires = sb.expires
	}
	s.sb, s.sw = sb, sb.sw
	if warm {
		l.sessStats.fromPool.Add(1)
	} else {
		l.sessStats.cold.Add(1)
	}
	l.log.Debug().Str("container_id", shortID(sb.id)).Bool("warm", warm).Str("expires", strconv.FormatInt(s.opts.Expires.Unix(), 10)).Msg("session sandbox from the session pool")
	return true, nil
}

// Expires is when the session ends at the latest: the SessionOptions' Expires, or
// for a session taken from the pool its sandbox's expiry label, if sooner. Zero if
// none was set.
func (s *Session) Expires() time.Time { return s.opts.Expires }

// SessionPoolStats describes the session pool and where sessions' sandboxes came from.
type SessionPoolStats struct {
	Size     int   // configured size; 0: no session pool
	Idle     int   // session sandboxes ready and waiting for a session
	FromPool int64 // sessions opened on a sandbox that was waiting in the pool
	Cold     int64 // sessions opened on a sandbox started for them
	LastErr  error // the last refill failure, nil once a refill succeeds
}

// SessionPoolStats reports the session pool's state and the sessions opened so far.
func (l *Launcher) SessionPoolStats() SessionPoolStats {
	st := SessionPoolStats{FromPool: l.sessStats.fromPool.Load(), Cold: l.sessStats.cold.Load()}
	if l.spool != nil {
		ps := l.spool.stats()
		st.Size, st.Idle, st.LastErr = ps.Size, ps.Idle, ps.LastErr
	}
	return st
}
