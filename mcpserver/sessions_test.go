package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// fakeSessions is a SessionBackend whose sessions answer with the call's count in
// stdout, and block while gate is set (for busy). A call with tools makes toolCalls
// calls of the tool echo-server.nope (code mode).
type fakeSessions struct {
	mu        sync.Mutex
	opened    []launcher.SessionOptions
	conns     []*fakeConn
	gate      chan struct{}
	toolCalls int
	// A call in flight at Close ends as the launcher's may, its sandbox gone: failing
	// with closeErr, or with closeLost a result whose interpreter was lost; else
	// launcher.ErrSessionClosed.
	closeErr  error
	closeLost bool
	openErr   error // OpenSession's, if set
}

type fakeConn struct {
	f      *fakeSessions
	mu     sync.Mutex
	n      int
	ran    []launcher.Job
	closed bool
	gone   chan struct{} // closed by Close: a call in flight ends, as its sandbox would
}

func (c *fakeConn) jobs() []launcher.Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]launcher.Job(nil), c.ran...)
}

func (f *fakeSessions) OpenSession(_ context.Context, o launcher.SessionOptions) (SessionConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.openErr != nil {
		return nil, f.openErr
	}
	c := &fakeConn{f: f, gone: make(chan struct{})}
	f.opened = append(f.opened, o)
	f.conns = append(f.conns, c)
	return c, nil
}

func (c *fakeConn) Exec(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	c.f.mu.Lock()
	gate := c.f.gate
	c.f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return launcher.Result{SessionState: launcher.SessionRolledBack}, ctx.Err()
		case <-c.gone:
			switch {
			case c.f.closeErr != nil:
				return launcher.Result{SessionState: launcher.SessionLost}, c.f.closeErr
			case c.f.closeLost:
				return launcher.Result{Stdout: "started\n", ExitCode: 137, SessionState: launcher.SessionLost}, nil
			}
			return launcher.Result{}, launcher.ErrSessionClosed
		}
	}
	if job.Tools != nil {
		for range c.f.toolCalls {
			job.Tools.Serve(ctx, []byte(`{"server":"echo-server","tool":"nope","arguments":{}}`), 0)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	c.ran = append(c.ran, job)
	return launcher.Result{Stdout: strings.Repeat("x", c.n), SessionState: launcher.SessionKept}, nil
}

func (c *fakeConn) Close() {
	c.mu.Lock()
	if !c.closed {
		close(c.gone)
	}
	c.closed = true
	c.mu.Unlock()
}

func (c *fakeConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func sessionOpts(f *fakeSessions) SessionOptions {
	return SessionOptions{Backend: f, Max: 2, IdleTimeout: time.Minute, MaxLifetime: time.Hour, Memory: 512 << 20}
}

func callNamed(tb testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	tb.Helper()
	res, err := cs.CallTool(tb.(interface{ Context() context.Context }).Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		tb.Fatalf("CallTool(%s): protocol error %v", name, err)
	}
	return res
}

func createSession(t *testing.T, cs *mcp.ClientSession) sessionCreateOutput {
	t.Helper()
	res := callNamed(t, cs, toolSessionCreate, map[string]any{})
	if res.IsError {
		t.Fatalf("session_create: %s", text(t, res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out sessionCreateOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func sessionExecOut(t *testing.T, cs *mcp.ClientSession, id string) (*mcp.CallToolResult, execOutput) {
	t.Helper()
	res := callNamed(t, cs, "exec", map[string]any{"code": "print(1)", "session_id": id})
	if res.IsError {
		return res, execOutput{}
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out execOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return res, out
}

// TestSessionToolsLifecycle: create, two calls that count, close (twice), and a call
// after the close that says it was closed and to call session_create. The handle has
// at least 128 random bits and never reaches the log.
func TestSessionToolsLifecycle(t *testing.T) {
	f := &fakeSessions{}
	var logs bytes.Buffer
	opts := Options{Sessions: sessionOpts(f), Logger: zerolog.New(&logs)}
	cs := connect(t, t.Context(), &fakeRunner{}, opts)

	c := createSession(t, cs)
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(c.SessionID, "sess_"))
	if err != nil || len(raw) < 16 {
		t.Fatalf("session_id %q: want at least 128 random bits, base64url", c.SessionID)
	}
	if c.IdleTimeoutS != 60 || c.MaxLifetimeS != 3600 || c.MemoryBytes != 512<<20 || c.ExpiresAt == "" {
		t.Fatalf("session_create: got %+v", c)
	}
	for i := 1; i <= 2; i++ {
		res, out := sessionExecOut(t, cs, c.SessionID)
		if res.IsError || out.Session == nil || out.Session.ExecutionCount != i || out.Session.State != "kept" || out.Stdout != strings.Repeat("x", i) {
			t.Fatalf("call %d: got %+v (%v)", i, out.Session, res.IsError)
		}
		if !strings.Contains(text(t, res), "state kept") {
			t.Fatalf("call %d text: %q", i, text(t, res))
		}
	}
	// A one-shot exec has no session.
	if out := structured(t, call(t, t.Context(), cs, `{"code":"print(1)"}`)); out.Session != nil {
		t.Fatalf("one-shot exec: got session %+v", out.Session)
	}
	res := callNamed(t, cs, toolSessionClose, map[string]any{"session_id": c.SessionID})
	if res.IsError || !strings.Contains(text(t, res), "closed: true") || !f.conns[0].isClosed() {
		t.Fatalf("session_close: %s", text(t, res))
	}
	res = callNamed(t, cs, toolSessionClose, map[string]any{"session_id": c.SessionID})
	if res.IsError || !strings.Contains(text(t, res), "closed: false") {
		t.Fatalf("second session_close: %s", text(t, res))
	}
	res, _ = sessionExecOut(t, cs, c.SessionID)
	if got := text(t, res); !res.IsError || !strings.Contains(got, "closed") || !strings.Contains(got, "session_create") {
		t.Fatalf("exec after close: got %q", got)
	}
	if strings.Contains(logs.String(), c.SessionID) || strings.Contains(logs.String(), c.SessionID[5:20]) {
		t.Fatalf("the log holds the session handle:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), handleHash(c.SessionID)) {
		t.Fatalf("the log does not name the session by its hash:\n%s", logs.String())
	}
}

// TestSessionExpiry: the idle timeout (reset by each call) and the maximum lifetime
// end a session; its handle then gets an error that says it expired and to call
// session_create, and the sandbox is closed.
func TestSessionExpiry(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		f := &fakeSessions{}
		o := sessionOpts(f)
		o.IdleTimeout = 300 * time.Millisecond
		cs := connect(t, t.Context(), &fakeRunner{}, Options{Sessions: o})
		c := createSession(t, cs)
		for range 3 { // each call resets the idle clock
			time.Sleep(150 * time.Millisecond)
			if res, _ := sessionExecOut(t, cs, c.SessionID); res.IsError {
				t.Fatalf("call within the idle timeout: %s", text(t, res))
			}
		}
		time.Sleep(600 * time.Millisecond)
		res, _ := sessionExecOut(t, cs, c.SessionID)
		if got := text(t, res); !res.IsError || !strings.Contains(got, "expired: it was idle") || !strings.Contains(got, "session_create") {
			t.Fatalf("after the idle timeout: got %q", got)
		}
		if !f.conns[0].isClosed() {
			t.Fatal("the expired session's sandbox was not closed")
		}
	})
	t.Run("lifetime", func(t *testing.T) {
		f := &fakeSessions{}
		o := sessionOpts(f)
		o.MaxLifetime = 500 * time.Millisecond
		cs := connect(t, t.Context(), &fakeRunner{}, Options{Sessions: o})
		c := createSession(t, cs)
		if exp := f.opened[0].Expires; time.Until(exp) > time.Second || exp.IsZero() {
			t.Fatalf("the backend's expiry (its label): got %v, want within the lifetime", exp)
		}
		for range 4 {
			time.Sleep(200 * time.Millisecond)
			sessionExecOut(t, cs, c.SessionID)
		}
		res, _ := sessionExecOut(t, cs, c.SessionID)
		if got := text(t, res); !res.IsError || !strings.Contains(got, "maximum lifetime") {
			t.Fatalf("after the maximum lifetime: got %q", got)
		}
		if !f.conns[0].isClosed() {
			t.Fatal("the expired session's sandbox was not closed")
		}
	})
}

// TestSessionBusyAndMax: a second call while one runs gets a "busy" tool error; more
// sessions than --max-sessions are refused naming the flag and the variable.
func TestSessionBusyAndMax(t *testing.T) {
	f := &fakeSessions{gate: make(chan struct{})}
	cs := connect(t, t.Context(), &fakeRunner{}, Options{Sessions: sessionOpts(f), Vars: testVars})
	c := createSession(t, cs)
	done := make(chan *mcp.CallToolResult)
	go func() {
		res, _ := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "1", "session_id": c.SessionID}})
		done <- res
	}()
	time.Sleep(200 * time.Millisecond)
	res, _ := sessionExecOut(t, cs, c.SessionID)
	if got := text(t, res); !res.IsError || !strings.Contains(got, "busy") {
		t.Fatalf("second call: got %q, want a busy error", got)
	}
	close(f.gate)
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("first call failed")
	}
	createSession(t, cs)
	res = callNamed(t, cs, toolSessionCreate, map[string]any{})
	if got := text(t, res); !res.IsError || !strings.Contains(got, "--max-sessions") || !strings.Contains(got, "MCP_EXEC_MAX_SESSIONS") {
		t.Fatalf("third session: got %q", got)
	}
}

// TestSessionCreateSpellsSetting: a sandbox that cannot start for a setting's sake (on
// Kubernetes, a pod no node has room for) fails session_create naming the setting by
// its flag and its variable, as exec's failures do.
func TestSessionCreateSpellsSetting(t *testing.T) {
	f := &fakeSessions{openErr: fmt.Errorf("starting pod p: %w", &backend.SettingError{Setting: "cpus", Text: func(v backend.Vars) string {
		return "no node can take it (" + v.Name("cpus") + ")"
	}})}
	cs := connect(t, t.Context(), &fakeRunner{}, Options{Sessions: sessionOpts(f), Vars: testVars})
	res := callNamed(t, cs, toolSessionCreate, map[string]any{})
	want := "sandbox unavailable: starting pod p: no node can take it (--cpus, MCP_EXEC_CPUS)"
	if got := text(t, res); !res.IsError || got != want {
		t.Fatalf("session_create: got %q (isError %v), want %q", got, res.IsError, want)
	}
}

// TestSessionsOff: with Max 0 the session tools are absent and exec has no session_id.
func TestSessionsOff(t *testing.T) {
	f := &fakeSessions{}
	o := sessionOpts(f)
	o.Max = 0
	cs := connect(t, t.Context(), &fakeRunner{}, Options{Sessions: o})
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "exec" {
		t.Fatalf("tools: got %d, want exec alone", len(tools.Tools))
	}
	schema, _ := json.Marshal(tools.Tools[0].InputSchema)
	if strings.Contains(string(schema), "session_id") || strings.Contains(tools.Tools[0].Description, "session_create") {
		t.Fatalf("exec mentions sessions with sessions off: %s", schema)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "1", "session_id": "x"}})
	if err == nil && !res.IsError {
		t.Fatal("exec with session_id was accepted with sessions off")
	}
	if len(f.opened) != 0 {
		t.Fatal("a session was opened")
	}
}

// TestSessionIdentity: over HTTP with auth, a session belongs to the identity that
// created it; another identity's exec and close get "not found" and change nothing.
func TestSessionIdentity(t *testing.T) {
	f := &fakeSessions{}
	client := authClients(t, New(&fakeRunner{}, Options{Sessions: sessionOpts(f)}))
	alice, bob := client("alice"), client("bob")
	c := createSession(t, alice)
	res, _ := sessionExecOut(t, bob, c.SessionID)
	if got := text(t, res); !res.IsError || !strings.Contains(got, "not found") {
		t.Fatalf("bob's exec in alice's session: got %q, want not found", got)
	}
	res = callNamed(t, bob, toolSessionClose, map[string]any{"session_id": c.SessionID})
	if f.conns[0].isClosed() || !strings.Contains(text(t, res), "closed: false") {
		t.Fatalf("bob closed alice's session: %s", text(t, res))
	}
	if res, out := sessionExecOut(t, alice, c.SessionID); res.IsError || out.Session.ExecutionCount != 1 {
		t.Fatalf("alice's exec: %s", text(t, res))
	}
	// Once closed, bob still learns nothing (not "closed").
	callNamed(t, alice, toolSessionClose, map[string]any{"session_id": c.SessionID})
	res, _ = sessionExecOut(t, bob, c.SessionID)
	if got := text(t, res); !strings.Contains(got, "not found") {
		t.Fatalf("bob's exec in alice's closed session: got %q, want not found", got)
	}
}

// authClients serves srv over HTTP with bearer auth, where the tokens "alice" and
// "bob" are two OAuth identities; client(tok) connects as one of them.
func authClients(t *testing.T, srv *mcp.Server) (client func(tok string) *mcp.ClientSession) {
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok != "alice" && tok != "bob" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "https://issuer " + tok, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return func(tok string) *mcp.ClientSession {
		hc := &http.Client{Transport: bearer{tok}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
}

// TestSessionMaxPerIdentity: with MaxPerIdentity 1, an identity's second session is
// refused with an error naming the flag and the variable, while another identity
// still gets one; a closed session frees its owner's place.
func TestSessionMaxPerIdentity(t *testing.T) {
	f := &fakeSessions{}
	o := sessionOpts(f)
	o.Max, o.MaxPerIdentity = 3, 1
	client := authClients(t, New(&fakeRunner{}, Options{Sessions: o, Vars: testVars}))
	alice, bob := client("alice"), client("bob")
	c := createSession(t, alice)
	res := callNamed(t, alice, toolSessionCreate, map[string]any{})
	if got := text(t, res); !res.IsError || !strings.Contains(got, "--max-sessions-per-identity") || !strings.Contains(got, "MCP_EXEC_MAX_SESSIONS_PER_IDENTITY") {
		t.Fatalf("alice's second session: got %q (error %v), want refused naming the limit", got, res.IsError)
	}
	createSession(t, bob)
	callNamed(t, alice, toolSessionClose, map[string]any{"session_id": c.SessionID})
	createSession(t, alice)
	if len(f.opened) != 3 {
		t.Fatalf("opened %d sessions, want 3", len(f.opened))
	}
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}
