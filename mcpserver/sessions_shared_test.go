package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// fakeStore is a SessionStore in memory that several servers share, as replicas share
// the cluster: a session is its owner, its call count and whether a call runs. It is
// their AttachBackend too: its sandboxes answer with the session's count in stdout.
type fakeStore struct {
	mu       sync.Mutex
	sessions map[string]*fakeShared
	ended    map[string]string // handle → why, as the replica that ended it would say
	gate     chan struct{}     // set: calls block until closed (busy)
	created  []launcher.SessionOptions
}

type fakeShared struct {
	owner string
	count int
	busy  bool
}

func newFakeStore() *fakeStore {
	return &fakeStore{sessions: map[string]*fakeShared{}, ended: map[string]string{}}
}

func (f *fakeStore) Create(_ context.Context, handle, owner string, rec backend.SessionRecord) (backend.SessionClaim, error) {
	return backend.SessionClaim{Handle: handle, Owner: owner, Record: rec}, nil
}

func (f *fakeStore) OpenAttached(_ context.Context, o launcher.SessionOptions) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, o)
	return "pod", nil
}

func (f *fakeStore) Release(_ context.Context, c backend.SessionClaim) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.sessions[c.Handle]; s != nil {
		s.busy = false
	} else {
		f.sessions[c.Handle] = &fakeShared{owner: c.Owner}
	}
	return time.Now().Add(time.Minute), nil
}

func (f *fakeStore) Claim(_ context.Context, handle, owner string, _ time.Duration) (backend.SessionClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[handle]
	if s == nil || s.owner != owner {
		if why, ok := f.ended[handle]; ok {
			return backend.SessionClaim{}, &launcher.GoneError{Why: why}
		}
		return backend.SessionClaim{}, launcher.ErrSessionGone
	}
	if s.busy {
		return backend.SessionClaim{}, launcher.ErrSessionBusy
	}
	s.busy = true
	s.count++
	return backend.SessionClaim{Handle: handle, Owner: owner, Sandbox: handle, Record: backend.SessionRecord{Count: s.count}}, nil
}

func (f *fakeStore) Restart(context.Context, backend.SessionClaim) (backend.SessionClaim, error) {
	return backend.SessionClaim{}, errors.New("not in this fake")
}

func (f *fakeStore) End(context.Context, backend.SessionClaim, string) {}

// AttachSession: the fake's sandbox ids are the handles.
func (f *fakeStore) AttachSession(handle string) SessionConn { return fakeAttached{f, handle} }

type fakeAttached struct {
	f      *fakeStore
	handle string
}

func (a fakeAttached) Exec(ctx context.Context, _ launcher.Job) (launcher.Result, error) {
	a.f.mu.Lock()
	gate := a.f.gate
	a.f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	return launcher.Result{Stdout: strings.Repeat("x", a.f.sessions[a.handle].count), SessionState: launcher.SessionKept}, nil
}

func (a fakeAttached) Close() {}

func (f *fakeStore) Close(_ context.Context, handle, owner string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[handle]
	if s == nil || s.owner != owner {
		return false, nil
	}
	delete(f.sessions, handle)
	return true, nil
}

func (f *fakeStore) Count(_ context.Context, owner string) (all, owned int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		all++
		if s.owner == owner {
			owned++
		}
	}
	return all, owned, nil
}

func sharedOpts(f *fakeStore) SessionOptions {
	return SessionOptions{Store: f, Attach: f, Max: 2, IdleTimeout: time.Minute, MaxLifetime: time.Hour, Memory: 512 << 20}
}

// TestSharedSessionsAnyReplica: with a shared SessionStore, two servers (replicas) serve
// one session alternately: created on A, its calls count on B and A in turn, a call
// while another runs on the other replica is busy, a close on B ends it for A, and the
// bound counts both replicas' sessions. The logs name the session by its hash only.
func TestSharedSessionsAnyReplica(t *testing.T) {
	f := newFakeStore()
	var logs bytes.Buffer
	opts := Options{Sessions: sharedOpts(f), Logger: zerolog.New(&logs)}
	a := connect(t, t.Context(), &fakeRunner{}, opts)
	b := connect(t, t.Context(), &fakeRunner{}, opts)

	c := createSession(t, a)
	if c.IdleTimeoutS != 60 || c.MaxLifetimeS != 3600 || c.MemoryBytes != 512<<20 || c.ExpiresAt == "" {
		t.Fatalf("session_create: got %+v", c)
	}
	if len(f.created) != 1 || f.created[0].Memory != 512<<20 || time.Until(f.created[0].Expires) < 59*time.Minute {
		t.Fatalf("the store got %+v, want the session memory and an expiry an hour away", f.created)
	}
	for i, cs := range []*mcp.ClientSession{b, a, b} {
		res, out := sessionExecOut(t, cs, c.SessionID)
		if res.IsError || out.Session == nil || out.Session.ExecutionCount != i+1 || out.Session.State != "kept" || out.Stdout != strings.Repeat("x", i+1) {
			t.Fatalf("call %d (replica %s): got %+v (%s)", i+1, "BAB"[i:i+1], out.Session, text(t, res))
		}
	}

	// Busy across replicas.
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
	done := make(chan bool)
	go func() {
		res, _ := sessionExecOut(t, a, c.SessionID)
		done <- res.IsError
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f.mu.Lock()
		busy := f.sessions[c.SessionID].busy
		f.mu.Unlock()
		if busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first call never started")
		}
	}
	if res, _ := sessionExecOut(t, b, c.SessionID); !res.IsError || !strings.Contains(text(t, res), "busy") {
		t.Fatalf("a call on B while A's runs: got %q, want busy", text(t, res))
	}
	close(f.gate)
	if <-done {
		t.Fatal("A's call failed")
	}
	f.mu.Lock()
	f.gate = nil
	f.mu.Unlock()

	// The bound counts every replica's sessions: one on A, one on B, none more on A.
	createSession(t, b)
	if res := callNamed(t, a, toolSessionCreate, map[string]any{}); !res.IsError || !strings.Contains(text(t, res), "--max-sessions") {
		t.Fatalf("a third session: got %q, want refused naming --max-sessions", text(t, res))
	}

	// Closed on B: A's next call says not found, and to call session_create.
	if res := callNamed(t, b, toolSessionClose, map[string]any{"session_id": c.SessionID}); res.IsError || !strings.Contains(text(t, res), "closed: true") {
		t.Fatalf("session_close on B: %s", text(t, res))
	}
	if res := callNamed(t, a, toolSessionClose, map[string]any{"session_id": c.SessionID}); res.IsError || !strings.Contains(text(t, res), "closed: false") {
		t.Fatalf("session_close again on A: %s", text(t, res))
	}
	res, _ := sessionExecOut(t, a, c.SessionID)
	if got := text(t, res); !res.IsError || !strings.Contains(got, "not found") || !strings.Contains(got, "closed, expired, or never existed") || !strings.Contains(got, toolSessionCreate) {
		t.Fatalf("exec on A after the close on B: got %q", got)
	}
	// The replica that ended a session says why.
	f.mu.Lock()
	f.ended[c.SessionID] = "expired: it was idle for more than 1m0s"
	f.mu.Unlock()
	res, _ = sessionExecOut(t, b, c.SessionID)
	if got := text(t, res); !res.IsError || !strings.Contains(got, "session expired: it was idle for more than 1m0s; its variables and files are gone") {
		t.Fatalf("exec after an expiry this replica saw: got %q", got)
	}
	if strings.Contains(logs.String(), c.SessionID) || strings.Contains(logs.String(), c.SessionID[5:20]) {
		t.Fatalf("the log holds the session handle:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), handleHash(c.SessionID)) {
		t.Fatalf("the log does not name the session by its hash:\n%s", logs.String())
	}
}

// TestSharedSessionsIdentity: with a shared SessionStore, another identity's handle is
// "not found", its close closes nothing, and the per-identity bound counts the store's.
func TestSharedSessionsIdentity(t *testing.T) {
	f := newFakeStore()
	o := sharedOpts(f)
	o.Max, o.MaxPerIdentity = 3, 1
	client := authClients(t, New(&fakeRunner{}, Options{Sessions: o}))
	alice, bob := client("alice"), client("bob")
	c := createSession(t, alice)
	if res := callNamed(t, alice, toolSessionCreate, map[string]any{}); !res.IsError || !strings.Contains(text(t, res), "--max-sessions-per-identity") {
		t.Fatalf("alice's second session: got %q, want refused naming the limit", text(t, res))
	}
	if res, _ := sessionExecOut(t, bob, c.SessionID); !res.IsError || !strings.Contains(text(t, res), "not found") {
		t.Fatalf("bob with alice's handle: got %q, want not found", text(t, res))
	}
	if res := callNamed(t, bob, toolSessionClose, map[string]any{"session_id": c.SessionID}); !strings.Contains(text(t, res), "closed: false") {
		t.Fatalf("bob closing alice's session: %s", text(t, res))
	}
	if res, out := sessionExecOut(t, alice, c.SessionID); res.IsError || out.Session == nil || out.Session.ExecutionCount != 1 {
		t.Fatalf("alice after bob's attempts: got %s", text(t, res))
	}
	createSession(t, bob)
}
