package mcpserver

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// memoryStore is the SessionStore of the sessions one server holds: in its memory, each
// ended by a timer at its record's due time (backend.SessionRecord.Due, as on
// Kubernetes), and what became of recently ended ones (for a clear "expired" or
// "closed" message). A session's sandbox is the server's: ending a session calls
// endSandbox.
type memoryStore struct {
	log        zerolog.Logger
	now        func() time.Time
	endSandbox func(sandbox string)

	mu     sync.Mutex
	open   map[string]*memSession  // by handle
	ended  map[string]endedSession // by handle; bounded (maxEnded)
	claims int                     // claim tokens made
}

// memSession is one session; guarded by memoryStore.mu.
type memSession struct {
	handle, owner string
	sandbox       string // "" while it starts
	created       time.Time
	rec           backend.SessionRecord
	token         string // the claim's, while Busy
	timer         *time.Timer
}

func newMemoryStore(log zerolog.Logger, endSandbox func(string)) *memoryStore {
	return &memoryStore{log: log, now: time.Now, endSandbox: endSandbox, open: map[string]*memSession{}, ended: map[string]endedSession{}}
}

// errNotYours is what a caller learns of a handle with no open session of its own.
var errNotYours = notYours{}

type notYours struct{}

func (notYours) Error() string        { return "no session of yours has this id" }
func (notYours) Is(target error) bool { return target == backend.ErrSessionGone }

func (m *memoryStore) Count(_ context.Context, owner string) (all, owned int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.open {
		if e.sandbox == "" {
			continue // starting: its creator counts it
		}
		all++
		if e.owner == owner {
			owned++
		}
	}
	return all, owned, nil
}

func (m *memoryStore) Create(_ context.Context, handle, owner string, rec backend.SessionRecord) (backend.SessionClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	rec.IdleUntil, rec.Busy = now.Add(rec.Idle), true
	e := &memSession{handle: handle, owner: owner, created: now, rec: rec, token: m.tokenLocked()}
	m.open[handle] = e
	return backend.SessionClaim{Handle: handle, Owner: owner, Token: e.token, Record: rec}, nil
}

func (m *memoryStore) tokenLocked() string {
	m.claims++
	return strconv.Itoa(m.claims)
}

func (m *memoryStore) Claim(_ context.Context, handle, owner string, _ time.Duration) (backend.SessionClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.open[handle]
	if e == nil || e.owner != owner || e.sandbox == "" {
		if ended, ok := m.ended[handle]; ok && ended.owner == owner {
			return backend.SessionClaim{}, &backend.GoneError{Why: ended.why}
		}
		return backend.SessionClaim{}, errNotYours
	}
	if e.rec.Busy {
		return backend.SessionClaim{}, backend.ErrSessionBusy
	}
	e.rec.Busy = true
	e.rec.Count++
	e.token = m.tokenLocked()
	return backend.SessionClaim{Handle: handle, Owner: owner, Token: e.token, Sandbox: e.sandbox, Record: e.rec}, nil
}

// Release ends claim c. The first release, its creation's, takes the sandbox and its
// end (which a sandbox from the session pool may bring forward). It returns when the
// session ends if no call comes, even if it ended during the call.
func (m *memoryStore) Release(_ context.Context, c backend.SessionClaim) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	e := m.open[c.Handle]
	if e == nil || e.token != c.Token {
		c.Record.IdleUntil = now.Add(c.Record.Idle)
		return c.Record.ExpiresAt(), nil
	}
	if e.sandbox == "" {
		e.sandbox, e.rec.Expires = c.Sandbox, c.Record.Expires
		e.rec.Lifetime = e.rec.Expires.Sub(e.created).Round(time.Second)
	}
	e.rec.Busy, e.token = false, ""
	e.rec.IdleUntil = now.Add(e.rec.Idle)
	m.armLocked(e)
	return e.rec.ExpiresAt(), nil
}

// Restart is not for held sandboxes: a launcher.Session starts its next interpreter
// itself.
func (m *memoryStore) Restart(context.Context, backend.SessionClaim) (backend.SessionClaim, error) {
	return backend.SessionClaim{}, errors.New("a held session restarts its own sandbox")
}

func (m *memoryStore) End(_ context.Context, c backend.SessionClaim, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.open[c.Handle]; e != nil && e.token == c.Token {
		if why == "" {
			delete(m.open, c.Handle)
			return
		}
		m.endLocked(e, why)
	}
}

func (m *memoryStore) Close(_ context.Context, handle, owner string) (bool, error) {
	m.mu.Lock()
	e := m.open[handle]
	if e == nil || e.owner != owner || e.sandbox == "" {
		m.mu.Unlock()
		return false, nil
	}
	m.endLocked(e, "closed by session_close")
	m.mu.Unlock()
	m.endSandbox(e.sandbox)
	return true, nil
}

// armLocked (re)starts e's expiry timer.
func (m *memoryStore) armLocked(e *memSession) {
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timer = time.AfterFunc(max(e.rec.ExpiresAt().Sub(m.now()), 0), func() { m.expire(e) })
}

// expire ends e if it is due; a call in flight re-arms at its end.
func (m *memoryStore) expire(e *memSession) {
	m.mu.Lock()
	if m.open[e.handle] != e || e.rec.Busy {
		m.mu.Unlock()
		return
	}
	why := e.rec.Due(m.now())
	if why == "" {
		m.armLocked(e)
		m.mu.Unlock()
		return
	}
	m.endLocked(e, why)
	m.mu.Unlock()
	m.log.Info().Str("session", handleHash(e.handle)).Int("calls", e.rec.Count).Msg("session expired")
	m.endSandbox(e.sandbox)
}

// endLocked forgets e as open and remembers why it ended.
func (m *memoryStore) endLocked(e *memSession, why string) {
	delete(m.open, e.handle)
	if e.timer != nil {
		e.timer.Stop()
	}
	if len(m.ended) >= maxEnded {
		for k := range m.ended { // drop an arbitrary one: the message only gets vaguer
			delete(m.ended, k)
			break
		}
	}
	m.ended[e.handle] = endedSession{owner: e.owner, why: why}
}
