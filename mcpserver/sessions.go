package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Sessions: an interpreter that keeps its variables, imports and /tmp across exec
// calls, named by a handle the server mints (session_create) and the client passes
// back as exec's session_id. See docs/sessions.md.

// SessionBackend opens sessions whose sandbox this server holds (LauncherSessions).
type SessionBackend interface {
	OpenSession(ctx context.Context, o launcher.SessionOptions) (SessionConn, error)
}

// SessionConn is one open session (launcher.Session and launcher.AttachedSession
// satisfy it).
type SessionConn interface {
	// Exec runs one call; Result.SessionState says what the session kept. It fails
	// with launcher.ErrSessionBusy while another call runs.
	Exec(ctx context.Context, job launcher.Job) (launcher.Result, error)
	Close()
}

// AttachBackend starts the sandboxes of sessions that no server holds, whose store every
// replica shares (LauncherSessions on Kubernetes): started, then detached; each call
// attaches anew, on whichever replica it lands.
type AttachBackend interface {
	// OpenAttached starts a session's sandbox (o.Labels and o.Annotations from the
	// store's claim) and returns its id once it is ready and detached.
	OpenAttached(ctx context.Context, o launcher.SessionOptions) (string, error)
	// AttachSession is the session whose sandbox is id; Close removes the sandbox.
	AttachSession(id string) SessionConn
}

// SessionStore keeps what each session is: its record (backend.SessionRecord) under its
// handle, its owner, its claim, and why it ended. The server keeps this server's in
// memory (newMemoryStore) unless SessionOptions.Store is set: launcher/kube's
// SessionStore keeps them in the session pods' annotations, shared by every replica.
// Errors: backend.ErrSessionBusy while another call runs (on any replica),
// backend.ErrSessionGone (a *backend.GoneError when the store knows why) for a handle
// with no open session of owner's.
type SessionStore interface {
	// Count is how many sessions the store holds, all of them and owner's; not those
	// still starting.
	Count(ctx context.Context, owner string) (all, owned int, err error)
	// Create records handle's new session for owner, claimed by its creation until
	// Release: the claim names the labels and annotations its sandbox must carry.
	Create(ctx context.Context, handle, owner string, rec backend.SessionRecord) (backend.SessionClaim, error)
	// Claim marks the session busy for one call of timeout.
	Claim(ctx context.Context, handle, owner string, timeout time.Duration) (backend.SessionClaim, error)
	// Release ends claim c (c.Sandbox set, after Create and Restart) and restarts the
	// idle clock: it returns when the session ends if no call comes; zero when it
	// ended meanwhile.
	Release(ctx context.Context, c backend.SessionClaim) (time.Time, error)
	// Restart is Create for c's session after its attached sandbox was lost (a held
	// one restarts by itself); an error ends the session.
	Restart(ctx context.Context, c backend.SessionClaim) (backend.SessionClaim, error)
	// End ends c's session (its sandbox did not start, or is gone) and remembers why
	// for its owner's next call; "" forgets it.
	End(ctx context.Context, c backend.SessionClaim, why string)
	// Close ends the session and its sandbox: true when it was open.
	Close(ctx context.Context, handle, owner string) (bool, error)
}

// SessionOptions configure sessions. Max 0 removes the session tools.
type SessionOptions struct {
	Backend SessionBackend // held sessions, in this server's memory (Store nil)
	// Store, when set, keeps the sessions instead of this server's memory, and Attach
	// starts their sandboxes: Max and MaxPerIdentity then bound the store's sessions
	// (every replica's together), and the server keeps no session of its own.
	Store  SessionStore
	Attach AttachBackend
	Max    int // sessions open at once on this server
	// MaxPerIdentity bounds the sessions one identity (see identity) holds open at
	// once; 0 is no bound but Max.
	MaxPerIdentity int
	IdleTimeout    time.Duration // reset by each call; 0 is 10 min
	MaxLifetime    time.Duration // from session_create; 0 is 1 h
	Memory         int64         // bytes, the session sandbox's memory limit (reported only)
}

func (o SessionOptions) on() bool {
	return o.Max > 0 && (o.Backend != nil || o.Store != nil && o.Attach != nil)
}

// shared reports whether the sessions are in a store every replica shares.
func (o SessionOptions) shared() bool { return o.Store != nil }

// LauncherSessions opens sessions with a launcher: held (SessionBackend) or attached
// (AttachBackend).
type LauncherSessions struct{ L *launcher.Launcher }

func (s LauncherSessions) OpenSession(ctx context.Context, o launcher.SessionOptions) (SessionConn, error) {
	sess, err := s.L.OpenSession(ctx, o)
	if err != nil {
		return nil, err // never a typed nil in the interface
	}
	return sess, nil
}

func (s LauncherSessions) OpenAttached(ctx context.Context, o launcher.SessionOptions) (string, error) {
	a, err := s.L.OpenAttached(ctx, o)
	if err != nil {
		return "", err
	}
	return a.ID(), nil
}

func (s LauncherSessions) AttachSession(id string) SessionConn { return s.L.AttachSession(id) }

const (
	toolSessionCreate = "session_create"
	toolSessionClose  = "session_close"
)

// sessionInfo is the session part of an exec result in a session.
type sessionInfo struct {
	ID             string `json:"id" jsonschema:"The session_id the call ran in."`
	ExecutionCount int    `json:"execution_count" jsonschema:"Calls run in this session so far, this one included."`
	State          string `json:"state" jsonschema:"kept: the session holds what this call left; rolled_back: the call was killed (timeout, cancel, memory) and the variables are as before it (files in /tmp are not rolled back); lost: the interpreter is gone and the next call starts an empty one (after a JavaScript call, only the JavaScript state is gone: stderr says which)."`
	ExpiresAt      string `json:"expires_at" jsonschema:"When the session ends unless another call comes first (RFC 3339, UTC)."`

	egress string // the session's egress profile, for the exec log line; not in the result
}

type sessionCreateInput struct {
	// Egress is in the schema only when profiles are configured (sessionEgressSchema).
	Egress string `json:"egress,omitempty" jsonschema:"An egress profile's name for the session's calls (sessionEgressSchema fills in the names, or drops the field)."`
}

type sessionCreateOutput struct {
	SessionID    string `json:"session_id" jsonschema:"Pass it as exec's session_id. Keep it secret: it is the session's only key."`
	ExpiresAt    string `json:"expires_at" jsonschema:"When the session ends if no call comes first (RFC 3339, UTC); each call moves it, up to the maximum lifetime."`
	IdleTimeoutS int64  `json:"idle_timeout_s" jsonschema:"Seconds without a call after which the session ends."`
	MaxLifetimeS int64  `json:"max_lifetime_s" jsonschema:"Seconds after session_create at which the session ends in any case."`
	MemoryBytes  int64  `json:"memory_bytes" jsonschema:"The session's memory limit in bytes, for its interpreter and every call together."`
}

type sessionCloseInput struct {
	SessionID string `json:"session_id" jsonschema:"The session to end. Closing one already closed or expired is not an error."`
}

type sessionCloseOutput struct {
	Closed bool `json:"closed" jsonschema:"True when this call ended the session; false when it had already ended."`
}

// sessions drives the session tools on a SessionStore: the same steps whichever store
// keeps the sessions (session_create: bounds, record, sandbox, release; exec: claim,
// call, release or restart; session_close), with the sandboxes held here (Backend) or
// attached per call (Attach).
type sessions struct {
	o        SessionOptions
	store    SessionStore
	profiles []EgressProfile // the server's egress profiles (addTools)
	vars     backend.Vars    // spells the bounds' settings in refusals
	log      zerolog.Logger
	now      func() time.Time

	// capMu makes a create's count and its start one step against the bounds: the
	// sessions being created here are counted until the store counts them.
	capMu      sync.Mutex
	starting   int
	startingBy map[string]int

	mu     sync.Mutex
	held   map[string]heldSandbox // the sandboxes held here, by the id the store names
	heldID int
}

// heldSandbox is a session's sandbox this server holds.
type heldSandbox struct {
	conn   SessionConn
	egress string // the profile fixed at session_create ("": none)
}

type endedSession struct {
	owner, why string
}

const maxEnded = 4096

func newSessions(o SessionOptions, vars backend.Vars, log zerolog.Logger) *sessions {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.MaxLifetime <= 0 {
		o.MaxLifetime = time.Hour
	}
	s := &sessions{o: o, vars: vars, log: log, now: time.Now, startingBy: map[string]int{}, held: map[string]heldSandbox{}}
	s.store = o.Store
	if s.store == nil {
		s.store = newMemoryStore(log, s.endHeld)
	}
	return s
}

// identity is who calls: the OAuth issuer and subject, or "" (the static token, or no
// HTTP auth: stdio's one client).
func identity(req *mcp.CallToolRequest) string {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		return "oauth " + req.Extra.TokenInfo.UserID
	}
	return ""
}

// handleHash is what the logs say of a handle: never the handle itself.
func handleHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}

// newHandle is a handle a client presents as its only key: prefix and 192 random bits
// (sessions' "sess_", background runs' "run_").
func newHandle(prefix string) string {
	var b [24]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *sessions) create(ctx context.Context, req *mcp.CallToolRequest, in sessionCreateInput) (*mcp.CallToolResult, sessionCreateOutput, error) {
	owner := identity(req)
	if err := checkEgress(in.Egress, Options{Egress: s.profiles}); err != nil {
		return nil, sessionCreateOutput{}, err
	}
	if s.o.shared() && in.Egress != "" {
		// Not in the schema (sessionEgressSchema), so only a client ignoring it gets here.
		return nil, sessionCreateOutput{}, fmt.Errorf("%w; exec without session_id takes egress", launcher.ErrSharedEgress)
	}
	if err := s.reserve(ctx, owner); err != nil {
		return nil, sessionCreateOutput{}, err
	}
	counted := false // by the store: no longer as starting
	defer func() {
		if !counted {
			s.capMu.Lock()
			s.unreserveLocked(owner)
			s.capMu.Unlock()
		}
	}()
	id, now := newHandle("sess_"), s.now()
	c, err := s.store.Create(ctx, id, owner, backend.SessionRecord{Idle: s.o.IdleTimeout, Expires: now.Add(s.o.MaxLifetime)})
	if err != nil {
		return nil, sessionCreateOutput{}, s.createFailed(err)
	}
	if err := s.start(ctx, &c, launcher.SessionOptions{Expires: c.Record.Expires, Memory: s.o.Memory, Egress: in.Egress, Audit: backend.AuditLabel{Session: handleHash(id)}}); err != nil {
		s.store.End(ctx, c, "")
		return nil, sessionCreateOutput{}, s.createFailed(err)
	}
	// Released and no longer starting in one step: counted once, by the store.
	s.capMu.Lock()
	expires, err := s.releaseStarted(ctx, c)
	s.unreserveLocked(owner)
	counted = true
	s.capMu.Unlock()
	if err != nil {
		return nil, sessionCreateOutput{}, s.createFailed(err)
	}
	return s.created(id, expires, c.Record.Expires.Sub(now), in.Egress)
}

// reserve checks the bounds for one more session of owner's and counts it as starting
// (unreserveLocked ends that). The store's count and this server's starting ones are one
// step: two replicas creating at the same moment may each see room for one more (the
// bound can be passed by the number of replicas creating at once).
func (s *sessions) reserve(ctx context.Context, owner string) error {
	s.capMu.Lock()
	defer s.capMu.Unlock()
	all, owned, err := s.store.Count(ctx, owner)
	if err != nil {
		return s.createFailed(err)
	}
	if all+s.starting >= s.o.Max {
		s.log.Warn().Int("open", s.o.Max).Msg("session_create refused: too many sessions")
		return s.errTooManySessions(false, s.o.Max)
	}
	if n := s.o.MaxPerIdentity; n > 0 && owned+s.startingBy[owner] >= n {
		s.log.Warn().Int("per_identity", n).Msg("session_create refused: too many sessions for this identity")
		return s.errTooManySessions(true, n)
	}
	s.starting++
	s.startingBy[owner]++
	return nil
}

// unreserveLocked ends reserve's count of a session as starting; called with capMu held.
func (s *sessions) unreserveLocked(owner string) {
	s.starting--
	if s.startingBy[owner]--; s.startingBy[owner] == 0 {
		delete(s.startingBy, owner)
	}
}

// start starts the sandbox of claim c (from Create or Restart) with so and the claim's
// labels and annotations, and names it in c: attached (the store is shared) or held
// here. A held sandbox may end sooner than asked (expirer): c's record then says so.
func (s *sessions) start(ctx context.Context, c *backend.SessionClaim, so launcher.SessionOptions) error {
	so.Labels, so.Annotations = c.Labels, c.Annotations
	if s.o.shared() {
		id, err := s.o.Attach.OpenAttached(ctx, so)
		c.Sandbox = id
		return err
	}
	conn, err := s.o.Backend.OpenSession(ctx, so)
	if err != nil {
		return err
	}
	c.Record.Expires = connDeadline(conn, c.Record.Expires)
	s.mu.Lock()
	s.heldID++
	c.Sandbox = "held-" + strconv.Itoa(s.heldID)
	s.held[c.Sandbox] = heldSandbox{conn: conn, egress: so.Egress}
	s.mu.Unlock()
	return nil
}

// releaseStarted releases the creation claim of c, whose sandbox runs: when the session
// ends if no call comes. A sandbox whose session could not be released goes.
func (s *sessions) releaseStarted(ctx context.Context, c backend.SessionClaim) (time.Time, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	expires, err := s.store.Release(rctx, c)
	if err == nil && expires.IsZero() {
		err = fmt.Errorf("starting the session: its sandbox %s went away", c.Sandbox)
	}
	if err != nil {
		if s.o.shared() {
			s.o.Attach.AttachSession(c.Sandbox).Close()
		} else {
			s.endHeld(c.Sandbox)
		}
		return time.Time{}, err
	}
	return expires, nil
}

// conn is the session conn of sandbox: the one held here, or an attachment.
func (s *sessions) conn(sandbox string) SessionConn {
	if s.o.shared() {
		return s.o.Attach.AttachSession(sandbox)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.held[sandbox]; ok {
		return h.conn
	}
	return closedConn{}
}

// holds reports whether the sandbox is held here, its session open.
func (s *sessions) holds(sandbox string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.held[sandbox]
	return ok
}

// endHeld closes the held sandbox of a session that ended (the memory store's expiry
// and close call it).
func (s *sessions) endHeld(sandbox string) {
	s.mu.Lock()
	h, ok := s.held[sandbox]
	delete(s.held, sandbox)
	s.mu.Unlock()
	if ok {
		h.conn.Close()
	}
}

// closedConn is the conn of a held sandbox already closed (its session ended while a
// call was claimed).
type closedConn struct{}

func (closedConn) Exec(context.Context, launcher.Job) (launcher.Result, error) {
	return launcher.Result{}, launcher.ErrSessionClosed
}
func (closedConn) Close() {}

func (s *sessions) createFailed(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	s.log.Error().Err(backend.Spelled(err, s.vars)).Msg("session_create failed: sandbox unavailable")
	return backend.Spelled(fmt.Errorf("sandbox unavailable: %w", err), s.vars)
}

// errTooManySessions is session_create's refusal at a bound of n sessions: one
// identity's (perIdentity), or all of them, this server's or (shared) every replica's.
func (s *sessions) errTooManySessions(perIdentity bool, n int) error {
	const tail = "close one with " + toolSessionClose + " or wait for one to expire, or use exec without session_id"
	switch {
	case perIdentity:
		return fmt.Errorf("too many sessions for you: one identity holds at most %d at once (%s); %s", n, s.vars.Name(SettingMaxSessionsPerIdentity), tail)
	case s.o.shared():
		return fmt.Errorf("too many sessions: at most %d at once (%s; on Kubernetes, every replica's together); %s", n, s.vars.Name(SettingMaxSessions), tail)
	}
	return fmt.Errorf("too many sessions: this server holds at most %d at once (%s); %s", n, s.vars.Name(SettingMaxSessions), tail)
}

// created is session_create's result for the session id ending at expires (if no call
// comes) and after maxLifetime at the latest, whose calls may use the egress profile
// egress ("": none).
func (s *sessions) created(id string, expires time.Time, maxLifetime time.Duration, egress string) (*mcp.CallToolResult, sessionCreateOutput, error) {
	out := sessionCreateOutput{
		SessionID:    id,
		ExpiresAt:    expires.UTC().Format(time.RFC3339),
		IdleTimeoutS: int64(s.o.IdleTimeout / time.Second),
		MaxLifetimeS: int64(maxLifetime / time.Second),
		MemoryBytes:  s.o.Memory,
	}
	ev := s.log.Info().Str("session", handleHash(id))
	if egress != "" {
		ev = ev.Str("egress", egress) // the operator's profile name
	}
	ev.Msg("session created")
	text := fmt.Sprintf("session_id: %s\nexpires_at: %s (idle timeout %d s, maximum lifetime %d s; each exec call with this session_id resets the idle timeout)\nmemory_bytes: %d",
		out.SessionID, out.ExpiresAt, out.IdleTimeoutS, out.MaxLifetimeS, out.MemoryBytes)
	if egress != "" {
		text += fmt.Sprintf("\negress: %s (every exec call in this session may use it; leave egress out of those calls)", egress)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// expirer is a SessionConn that knows when its sandbox's expiry label says it ends
// (launcher.Session: sooner than asked for a sandbox taken from the session pool).
type expirer interface{ Expires() time.Time }

// connDeadline is the sooner of deadline and conn's own end, if it has one.
func connDeadline(conn SessionConn, deadline time.Time) time.Time {
	if x, ok := conn.(expirer); ok {
		if end := x.Expires(); !end.IsZero() && end.Before(deadline) {
			return end
		}
	}
	return deadline
}

func (s *sessions) close(ctx context.Context, req *mcp.CallToolRequest, in sessionCloseInput) (*mcp.CallToolResult, sessionCloseOutput, error) {
	closed, err := s.store.Close(ctx, in.SessionID, identity(req))
	if err != nil {
		s.log.Error().Err(err).Str("session", handleHash(in.SessionID)).Msg("session_close failed")
		return nil, sessionCloseOutput{}, fmt.Errorf("closing the session failed, try again: %w", err)
	}
	if !closed {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "closed: false (no open session with this session_id)"}}}, sessionCloseOutput{}, nil
	}
	s.log.Info().Str("session", handleHash(in.SessionID)).Msg("session closed")
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "closed: true"}}}, sessionCloseOutput{Closed: true}, nil
}

// sessionError is a tool error about the session itself (not found, expired, busy):
// the sandbox is fine.
type sessionError struct{ msg string }

func (e *sessionError) Error() string { return e.msg }

// exec runs job in the session id, for the caller of req: claim, call, then release
// (or, when an attached sandbox was lost, a new one for the session). A background
// call's claim, taken before its run started, comes in ctx (sessions.background).
func (s *sessions) exec(ctx context.Context, req *mcp.CallToolRequest, id string, job launcher.Job) (launcher.Result, *sessionInfo, error) {
	c, ok := claimed(ctx, id)
	if !ok {
		var err error
		if c, err = s.claim(ctx, req, id, job.Timeout); err != nil {
			return launcher.Result{}, nil, err
		}
	}
	var egress string
	if !s.o.shared() {
		s.mu.Lock()
		egress = s.held[c.Sandbox].egress
		s.mu.Unlock()
	}
	res, err := s.conn(c.Sandbox).Exec(ctx, job)
	if (err != nil || res.SessionGone()) && !errors.Is(err, context.Canceled) && !s.o.shared() && !s.holds(c.Sandbox) {
		// A claimed session ends meanwhile only by session_close (expiry waits for the
		// call): its sandbox was removed under the call, which is neither a failure of
		// the sandbox nor a lost interpreter that the next call would replace.
		err = launcher.ErrSessionClosed
	}
	var expires time.Time
	if res.SessionGone() && s.o.shared() {
		// The launcher removed the attached sandbox; the session starts again, empty,
		// in a new one (as a held session does), keeping its handle, owner, count and
		// maximum lifetime.
		expires = s.restart(ctx, c)
	} else {
		expires = s.release(ctx, c)
	}
	if expires.IsZero() {
		expires = c.Record.ExpiresAt()
	}
	if errors.Is(err, launcher.ErrSessionBusy) {
		return res, nil, errSessionBusy()
	}
	if errors.Is(err, launcher.ErrSessionClosed) {
		return res, nil, &sessionError{fmt.Sprintf("session closed while the call ran (session_close), which stopped the call; call %s for a new session", toolSessionCreate)}
	}
	return res, &sessionInfo{ID: id, ExecutionCount: c.Record.Count, State: res.SessionState, ExpiresAt: expires.UTC().Format(time.RFC3339), egress: egress}, err
}

// claim claims the session id for one call of req's caller, or says why not.
func (s *sessions) claim(ctx context.Context, req *mcp.CallToolRequest, id string, timeout time.Duration) (backend.SessionClaim, error) {
	c, err := s.store.Claim(ctx, id, identity(req), timeout)
	var gone *backend.GoneError
	switch {
	case errors.Is(err, backend.ErrSessionBusy):
		return c, errSessionBusy()
	case errors.As(err, &gone):
		return c, &sessionError{fmt.Sprintf("session %s; its variables and files are gone: call %s for a new session", gone.Why, toolSessionCreate)}
	case errors.Is(err, backend.ErrSessionGone):
		// Another identity's handle gets the same.
		return c, &sessionError{fmt.Sprintf("session_id not found: %s; call %s for a new session", err, toolSessionCreate)}
	}
	return c, err
}

// release ends the call's claim c: when the session ends if no call comes (zero if
// the store could not say).
func (s *sessions) release(ctx context.Context, c backend.SessionClaim) time.Time {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	expires, err := s.store.Release(rctx, c)
	if err != nil {
		s.log.Warn().Err(err).Str("session", handleHash(c.Handle)).Msg("releasing a session's call")
	}
	return expires
}

// claimKey carries a background call's claim (a *heldClaim) from sessions.background to
// sessions.exec.
type claimKey struct{}

// heldClaim is the claim a background call took when it was answered; used once it is
// the call's (or released unused).
type heldClaim struct {
	c    backend.SessionClaim
	used atomic.Bool
}

// claimed is the background call's claim on the session id, when ctx carries one not
// yet used.
func claimed(ctx context.Context, id string) (backend.SessionClaim, bool) {
	h, _ := ctx.Value(claimKey{}).(*heldClaim)
	if h == nil || h.c.Handle != id || !h.used.CompareAndSwap(false, true) {
		return backend.SessionClaim{}, false
	}
	return h.c, true
}

// errLifetime is the cause of a background call's end at its session's maximum
// lifetime.
var errLifetime = errors.New("the session reached its maximum lifetime")

// background is body as a background call in the session of claim c, taken when the
// call was answered: no other call can come between the answer and the run, and the
// session stays busy (so its idle timeout does not run) until the run ends. The run
// is stopped at the session's maximum lifetime, which then ends the session: a run
// may be as long as --max-timeout-s, and nobody waits on it.
func (s *sessions) background(c backend.SessionClaim, body runBody) runBody {
	return func(ctx context.Context, progress func(launcher.Progress)) (*mcp.CallToolResult, any, error) {
		hc := &heldClaim{c: c}
		ctx, cancel := context.WithCancelCause(context.WithValue(ctx, claimKey{}, hc))
		defer cancel(nil)
		if !c.Record.Expires.IsZero() {
			t := time.AfterFunc(time.Until(c.Record.Expires), func() { cancel(errLifetime) })
			defer t.Stop()
		}
		res, out, err := body(ctx, progress)
		if hc.used.CompareAndSwap(false, true) {
			s.release(ctx, c) // the body ended before its call: the claim is still here
		}
		if err != nil && errors.Is(context.Cause(ctx), errLifetime) {
			lifetime := c.Record.Lifetime
			if lifetime <= 0 {
				lifetime = s.o.MaxLifetime
			}
			return nil, nil, &sessionError{fmt.Sprintf("the run was stopped at its session's maximum lifetime (%s after session_create, %s), and the session has ended; call %s for a new session",
				lifetime, s.vars.Name(SettingSessionMaxLifetime), toolSessionCreate)}
		}
		return res, out, err
	}
}

// restart gives the session of claim c, whose attached sandbox was lost, a new one: when
// it ends if no call comes, or zero when it could not (the session then ends, saying so
// to its owner).
func (s *sessions) restart(ctx context.Context, c backend.SessionClaim) time.Time {
	n, err := s.store.Restart(context.WithoutCancel(ctx), c)
	var expires time.Time
	if err == nil {
		sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), n.StartBy)
		err = s.start(sctx, &n, launcher.SessionOptions{Expires: n.Record.Expires, Memory: n.Memory, Audit: backend.AuditLabel{Session: handleHash(c.Handle)}})
		cancel()
		if err == nil {
			expires, err = s.releaseStarted(ctx, n)
		}
		if err != nil {
			s.store.End(ctx, n, "ended: its interpreter was lost and a new one could not start")
		}
	}
	if err != nil {
		s.log.Warn().Err(err).Str("session", handleHash(c.Handle)).Msg("restarting a session after its interpreter was lost")
	}
	return expires
}

func errSessionBusy() error {
	return &sessionError{"session busy: another exec call is running in this session (a call with background runs until its run ends); wait for it to end (or cancel it; a background run with run_cancel) and call again; calls in one session run one at a time"}
}

// addTools adds session_create and session_close.
func (s *sessions) addTools(srv *mcp.Server, o Options) {
	f, t := false, true
	s.profiles = o.Egress
	mcp.AddTool(srv, &mcp.Tool{
		Name: toolSessionCreate,
		Description: fmt.Sprintf(`Start a session: a Python interpreter that keeps its variables, imports and the files in /tmp across exec calls. Pass the session_id it returns as exec's "session_id".

Each exec call in a session runs on what the earlier ones left; a call that fails with an exception keeps what ran before the exception. A call killed for its timeout, cancelled, or killed for memory leaves the variables as they were before it (state "rolled_back"); files it wrote in /tmp are NOT rolled back. If the interpreter itself dies the session starts again empty (state "lost"). One call at a time: a second call while one runs gets a "busy" error.

The session ends after %s without a call (each call restarts that clock), %s after it was created in any case, with session_close, or when the server restarts; then its variables and files are gone and exec with its session_id fails saying so. Memory: %s for the interpreter and each call together. At most %d sessions at once on this server: close the ones you no longer need.`,
			s.o.IdleTimeout, s.o.MaxLifetime, size(int(s.o.Memory)), s.o.Max) + sessionLanguagesNote(o) + sessionEgressNote(o),
		InputSchema: sessionCreateSchema(o),
		Annotations: &mcp.ToolAnnotations{Title: "Start a session", DestructiveHint: &f, OpenWorldHint: &f},
	}, s.create)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        toolSessionClose,
		Description: "End a session started by session_create and free its memory: its variables and files are gone. Closing a session that has already ended is not an error.",
		Annotations: &mcp.ToolAnnotations{Title: "End a session", DestructiveHint: &t, IdempotentHint: true, OpenWorldHint: &f},
	}, s.close)
}

// sessionCreateSchema is the schema inferred from sessionCreateInput, with "egress"
// the enum of the profiles' names, or absent without profiles.
func sessionCreateSchema(o Options) *jsonschema.Schema {
	s, err := jsonschema.For[sessionCreateInput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: inferring session_create's input schema: %v", err)) // a bug in sessionCreateInput
	}
	sessionEgressSchema(s, o)
	return s
}

// sessionLanguagesNote is what session_create's description adds with languages
// besides Python (docs/sessions.md, Languages in a session).
func sessionLanguagesNote(o Options) string {
	if len(otherLanguages(o)) == 0 {
		return ""
	}
	return fmt.Sprintf(`

Calls in %s (exec's "language") run in the same session, each language keeping its own state, and /tmp is shared among them: bash keeps its variables, arrays, exported variables, functions and working directory (a killed call leaves them as before it, "rolled_back"); JavaScript keeps its global scope, top-level const, let and class included (they become globals that a later call may declare again; so do the bindings of a static import, which runs where it stands), in a node process that a killed call or process.exit ends: state "lost", and only the JavaScript state is gone (Python's, bash's and the files stay).%s`,
		strings.Join(quoted(otherLanguages(o)), " and "), typescriptSessionNote(o))
}

// typescriptSessionNote: a TypeScript call is a JavaScript call in the session's node.
func typescriptSessionNote(o Options) string {
	if !slices.Contains(o.Languages, "typescript") {
		return ""
	}
	return " A TypeScript call runs in that same node once its types are removed: it shares the global scope with the JavaScript calls, both ways, and loses it with them."
}

// sessionEgressNote is what session_create's description adds with egress profiles.
func sessionEgressNote(o Options) string {
	if len(o.Egress) == 0 || o.Sessions.shared() {
		return ""
	}
	return "\n\nEgress: with \"egress\" set to a profile's name, every exec call in the session may reach that profile's hosts over HTTP and HTTPS through a proxy (HTTP_PROXY and HTTPS_PROXY are set; TLS is end to end, except to a host where the server sets credentials, which requests there arrive with; a refused host, port or address is answered 403 with the reason), within the profile's caps, which count per call; there is still no DNS, no UDP and no other way out. The profile is fixed for the session: exec calls with its session_id leave \"egress\" out. Without it the session has no network at all. " + egressList(o.Egress)
}

// sessionsNote is what exec's description adds when sessions are on.
func sessionsNote(o Options) string {
	note := `

Sessions: with "session_id" (from session_create) the program runs in that session instead of a new sandbox: it sees the variables, imports and /tmp files the session's earlier calls left, and the result adds "session" (id, execution_count, state, expires_at). Without session_id, everything above holds: nothing persists.`
	if o.Runs.Max > 0 && !o.Sessions.shared() {
		note += ` With "background" too, the run is the session's call: the session is busy (other calls in it are refused) until the run ends, session_close stops it, and the session's maximum lifetime ends it; the idle timeout does not while it runs.`
	}
	return note
}

// sessionText is the session line of a result's text; "" outside a session.
func sessionText(si *sessionInfo) string {
	if si == nil {
		return ""
	}
	var what string
	switch si.State {
	case launcher.SessionKept:
		what = "the session keeps what this call left"
	case launcher.SessionRolledBack:
		what = "the call was killed; the variables are as before it (files in /tmp are not rolled back)"
	default:
		what = "the interpreter was lost; the next call starts an empty one"
	}
	return fmt.Sprintf("\nsession: %s, execution_count %d, state %s (%s), expires_at %s", si.ID, si.ExecutionCount, si.State, what, si.ExpiresAt)
}

// execOutputSchema is outputSchema with "session" only when sessions are on.
func execOutputSchema(o Options) *jsonschema.Schema {
	s := outputSchema()
	if !sessionsOn(o) {
		delete(s.Properties, "session")
	}
	return s
}
