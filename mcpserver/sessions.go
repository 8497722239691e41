package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
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

// SessionBackend opens sessions; cmd/mcp-exec adapts launcher.Launcher to it.
type SessionBackend interface {
	OpenSession(ctx context.Context, o launcher.SessionOptions) (SessionConn, error)
}

// SessionConn is one open session (launcher.Session satisfies it).
type SessionConn interface {
	// Exec runs one call; Result.SessionState says what the session kept. It fails
	// with launcher.ErrSessionBusy while another call runs.
	Exec(ctx context.Context, job launcher.Job) (launcher.Result, error)
	Close()
}

// SharedSessionStore keeps sessions outside this server, so that every replica serves
// every session (Kubernetes: the session pods are the store; cmd/mcp-exec adapts
// launcher/kube's SharedSessions). Errors: launcher.ErrSessionBusy while another call
// runs (on any replica), launcher.ErrSessionGone (a *launcher.GoneError when it knows why) for a handle
// with no open session of owner's.
type SharedSessionStore interface {
	// Create starts the session handle for owner, ending at expires at the latest; it
	// returns when it ends if no call comes.
	Create(ctx context.Context, handle, owner string, idle time.Duration, o launcher.SessionOptions) (time.Time, error)
	// Exec runs one call; it returns the session's call count and its new end.
	Exec(ctx context.Context, handle, owner string, job launcher.Job) (launcher.Result, int, time.Time, error)
	// Close ends the session: true when it was open.
	Close(ctx context.Context, handle, owner string) (bool, error)
	// Count is how many sessions the store holds, all of them and owner's.
	Count(ctx context.Context, owner string) (all, owned int, err error)
}

// SessionOptions configure sessions. Max 0 removes the session tools.
type SessionOptions struct {
	Backend SessionBackend
	// Shared, when set, holds the sessions instead of Backend: Max and MaxPerIdentity
	// then bound the store's sessions (every replica's together), and the server keeps
	// no session state of its own but a short memory of why sessions it ended ended.
	Shared SharedSessionStore
	Max    int // sessions open at once on this server
	// MaxPerIdentity bounds the sessions one identity (see identity) holds open at
	// once; 0 is no bound but Max.
	MaxPerIdentity int
	IdleTimeout    time.Duration // reset by each call; 0 is 10 min
	MaxLifetime    time.Duration // from session_create; 0 is 1 h
	Memory         int64         // bytes, the session sandbox's memory limit (reported only)
}

func (o SessionOptions) on() bool { return o.Max > 0 && (o.Backend != nil || o.Shared != nil) }

const (
	toolSessionCreate = "session_create"
	toolSessionClose  = "session_close"
)

// sessionInfo is the session part of an exec result in a session.
type sessionInfo struct {
	ID             string `json:"id" jsonschema:"The session_id the call ran in."`
	ExecutionCount int    `json:"execution_count" jsonschema:"Calls run in this session so far, this one included."`
	State          string `json:"state" jsonschema:"kept: the session holds what this call left; rolled_back: the call was killed (timeout, cancel, memory) and the variables are as before it (files in /tmp are not rolled back); lost: the interpreter is gone and the next call starts an empty one."`
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

// sessionEntry is one open session.
type sessionEntry struct {
	id, owner string
	egress    string // the profile fixed at session_create ("": none)
	conn      SessionConn
	created   time.Time
	deadline  time.Time // of the maximum lifetime

	// Guarded by sessions.mu.
	lastUsed time.Time
	count    int
	inCall   bool
	timer    *time.Timer
}

// sessions holds the open sessions and what became of recently ended ones (for a
// clear "expired" or "closed" message).
type sessions struct {
	o        SessionOptions
	profiles []EgressProfile // the server's egress profiles (addTools)
	log      zerolog.Logger
	now      func() time.Time

	mu    sync.Mutex
	open  map[string]*sessionEntry
	ended map[string]endedSession // by handle; bounded (maxEnded)

	// With a SharedSessionStore: the sessions this server is creating, in all and by owner.
	starting   int
	startingBy map[string]int
}

type endedSession struct {
	owner, why string
}

const maxEnded = 4096

func newSessions(o SessionOptions, log zerolog.Logger) *sessions {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.MaxLifetime <= 0 {
		o.MaxLifetime = time.Hour
	}
	return &sessions{o: o, log: log, now: time.Now, open: map[string]*sessionEntry{}, ended: map[string]endedSession{}, startingBy: map[string]int{}}
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

func newHandle() string {
	var b [24]byte // 192 random bits
	rand.Read(b[:])
	return "sess_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// expiresAt is when e ends if no call comes; called with s.mu held.
func (s *sessions) expiresAt(e *sessionEntry) time.Time { return s.recordLocked(e).ExpiresAt() }

// arm (re)starts e's expiry timer; called with s.mu held.
func (s *sessions) arm(e *sessionEntry) {
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timer = time.AfterFunc(max(s.expiresAt(e).Sub(s.now()), 0), func() { s.expire(e) })
}

// expire ends e if it is still idle and due; a call in flight re-arms at its end.
func (s *sessions) expire(e *sessionEntry) {
	s.mu.Lock()
	if s.open[e.id] != e || e.inCall {
		s.mu.Unlock()
		return
	}
	why := s.recordLocked(e).Due(s.now())
	if why == "" {
		s.arm(e)
		s.mu.Unlock()
		return
	}
	s.endLocked(e, why)
	s.mu.Unlock()
	s.log.Info().Str("session", handleHash(e.id)).Int("calls", e.count).Msg("session expired")
	e.conn.Close()
}

// recordLocked is e as the session policy sees it (backend.SessionRecord.Due); called
// with s.mu held.
func (s *sessions) recordLocked(e *sessionEntry) backend.SessionRecord {
	return backend.SessionRecord{Idle: s.o.IdleTimeout, IdleUntil: e.lastUsed.Add(s.o.IdleTimeout),
		Expires: e.deadline, Lifetime: e.deadline.Sub(e.created).Round(time.Second), Count: e.count, Busy: e.inCall}
}

// endLocked forgets e as open and remembers why it ended; called with s.mu held.
func (s *sessions) endLocked(e *sessionEntry, why string) {
	delete(s.open, e.id)
	if e.timer != nil {
		e.timer.Stop()
	}
	if len(s.ended) >= maxEnded {
		for k := range s.ended { // drop an arbitrary one: the message only gets vaguer
			delete(s.ended, k)
			break
		}
	}
	s.ended[e.id] = endedSession{owner: e.owner, why: why}
}

func (s *sessions) create(ctx context.Context, req *mcp.CallToolRequest, in sessionCreateInput) (*mcp.CallToolResult, sessionCreateOutput, error) {
	owner := identity(req)
	if err := checkEgress(in.Egress, Options{Egress: s.profiles}); err != nil {
		return nil, sessionCreateOutput{}, err
	}
	if s.o.Shared != nil {
		if in.Egress != "" {
			// Not in the schema (sessionEgressSchema), so only a client ignoring it gets here.
			return nil, sessionCreateOutput{}, fmt.Errorf("%w; exec without session_id takes egress", launcher.ErrSharedEgress)
		}
		return s.createShared(ctx, owner)
	}
	s.mu.Lock()
	if len(s.open) >= s.o.Max {
		s.mu.Unlock()
		s.log.Warn().Int("open", s.o.Max).Msg("session_create refused: too many sessions")
		return nil, sessionCreateOutput{}, errTooManySessions(false, false, s.o.Max)
	}
	if n := s.o.MaxPerIdentity; n > 0 && s.ownedLocked(owner) >= n {
		s.mu.Unlock()
		s.log.Warn().Int("per_identity", n).Msg("session_create refused: too many sessions for this identity")
		return nil, sessionCreateOutput{}, errTooManySessions(false, true, n)
	}
	// Reserve the place while the sandbox starts.
	id := newHandle()
	now := s.now()
	e := &sessionEntry{id: id, owner: owner, egress: in.Egress, created: now, deadline: now.Add(s.o.MaxLifetime), lastUsed: now, inCall: true}
	s.open[id] = e
	s.mu.Unlock()

	conn, err := s.o.Backend.OpenSession(ctx, launcher.SessionOptions{Expires: e.deadline, Memory: s.o.Memory, Egress: in.Egress})
	s.mu.Lock()
	if err != nil {
		delete(s.open, id)
		s.mu.Unlock()
		return nil, sessionCreateOutput{}, s.createFailed(err)
	}
	e.conn, e.inCall = conn, false
	e.deadline = connDeadline(conn, e.deadline)
	e.lastUsed = s.now()
	s.arm(e)
	expires, lifetime := s.expiresAt(e), e.deadline.Sub(e.created)
	s.mu.Unlock()
	return s.created(id, expires, lifetime, in.Egress)
}

// errTooManySessions is session_create's refusal at a bound of n sessions: one
// identity's (perIdentity), or all of them, this server's or (shared) every replica's.
// The only place that names the bounds' flags and variables.
func errTooManySessions(shared, perIdentity bool, n int) error {
	const tail = "close one with " + toolSessionClose + " or wait for one to expire, or use exec without session_id"
	switch {
	case perIdentity:
		return fmt.Errorf("too many sessions for you: one identity holds at most %d at once (--max-sessions-per-identity, MCP_EXEC_MAX_SESSIONS_PER_IDENTITY); %s", n, tail)
	case shared:
		return fmt.Errorf("too many sessions: at most %d at once (--max-sessions, MCP_EXEC_MAX_SESSIONS; on Kubernetes, every replica's together); %s", n, tail)
	}
	return fmt.Errorf("too many sessions: this server holds at most %d at once (--max-sessions, MCP_EXEC_MAX_SESSIONS); %s", n, tail)
}

func (s *sessions) createFailed(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	s.log.Error().Err(err).Msg("session_create failed: sandbox unavailable")
	return fmt.Errorf("sandbox unavailable: %w", err)
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

// createShared is session_create with a SharedSessionStore. The bounds count the
// store's sessions plus those this server is starting; two replicas creating at the
// same moment may each see room for one more (the bound can be passed by the number of
// replicas creating at once).
func (s *sessions) createShared(ctx context.Context, owner string) (*mcp.CallToolResult, sessionCreateOutput, error) {
	all, owned, err := s.o.Shared.Count(ctx, owner)
	if err != nil {
		return nil, sessionCreateOutput{}, s.createFailed(err)
	}
	s.mu.Lock()
	all += s.starting
	owned += s.startingBy[owner]
	if all >= s.o.Max {
		s.mu.Unlock()
		s.log.Warn().Int("open", s.o.Max).Msg("session_create refused: too many sessions")
		return nil, sessionCreateOutput{}, errTooManySessions(true, false, s.o.Max)
	}
	if n := s.o.MaxPerIdentity; n > 0 && owned >= n {
		s.mu.Unlock()
		s.log.Warn().Int("per_identity", n).Msg("session_create refused: too many sessions for this identity")
		return nil, sessionCreateOutput{}, errTooManySessions(false, true, n)
	}
	s.starting++
	s.startingBy[owner]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.starting--
		if s.startingBy[owner]--; s.startingBy[owner] == 0 {
			delete(s.startingBy, owner)
		}
		s.mu.Unlock()
	}()
	id := newHandle()
	expires, err := s.o.Shared.Create(ctx, id, owner, s.o.IdleTimeout,
		launcher.SessionOptions{Expires: s.now().Add(s.o.MaxLifetime), Memory: s.o.Memory})
	if err != nil {
		return nil, sessionCreateOutput{}, s.createFailed(err)
	}
	return s.created(id, expires, s.o.MaxLifetime, "")
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

// ownedLocked counts the sessions open (or starting) for owner; called with s.mu held.
func (s *sessions) ownedLocked(owner string) int {
	n := 0
	for _, e := range s.open {
		if e.owner == owner {
			n++
		}
	}
	return n
}

func (s *sessions) close(ctx context.Context, req *mcp.CallToolRequest, in sessionCloseInput) (*mcp.CallToolResult, sessionCloseOutput, error) {
	owner := identity(req)
	if s.o.Shared != nil {
		closed, err := s.o.Shared.Close(ctx, in.SessionID, owner)
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
	s.mu.Lock()
	e := s.open[in.SessionID]
	if e == nil || e.owner != owner || e.conn == nil {
		s.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "closed: false (no open session with this session_id)"}}}, sessionCloseOutput{}, nil
	}
	s.endLocked(e, "closed by session_close")
	s.mu.Unlock()
	s.log.Info().Str("session", handleHash(e.id)).Int("calls", e.count).Msg("session closed")
	e.conn.Close()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "closed: true"}}}, sessionCloseOutput{Closed: true}, nil
}

// errSessionNotFound is what a caller learns of a handle it does not own.
func errSessionNotFound() error {
	return &sessionError{fmt.Sprintf("session_id not found: no session of yours has this id; call %s for a new session", toolSessionCreate)}
}

// sessionError is a tool error about the session itself (not found, expired, busy):
// the sandbox is fine.
type sessionError struct{ msg string }

func (e *sessionError) Error() string { return e.msg }

// exec runs job in the session id, for the caller of req.
func (s *sessions) exec(ctx context.Context, req *mcp.CallToolRequest, id string, job launcher.Job) (launcher.Result, *sessionInfo, error) {
	owner := identity(req)
	if s.o.Shared != nil {
		return s.execShared(ctx, owner, id, job)
	}
	s.mu.Lock()
	e := s.open[id]
	if e == nil || e.owner != owner || e.conn == nil {
		ended, ok := s.ended[id]
		s.mu.Unlock()
		if ok && ended.owner == owner {
			return launcher.Result{}, nil, &sessionError{fmt.Sprintf("session %s; its variables and files are gone: call %s for a new session", ended.why, toolSessionCreate)}
		}
		return launcher.Result{}, nil, errSessionNotFound()
	}
	if e.inCall {
		s.mu.Unlock()
		return launcher.Result{}, nil, errSessionBusy()
	}
	e.inCall = true
	e.count++
	count := e.count
	s.mu.Unlock()

	res, err := e.conn.Exec(ctx, job)

	s.mu.Lock()
	e.inCall = false
	e.lastUsed = s.now()
	info := &sessionInfo{ID: id, ExecutionCount: count, State: res.SessionState, ExpiresAt: s.expiresAt(e).UTC().Format(time.RFC3339), egress: e.egress}
	if s.open[id] == e {
		s.arm(e)
	}
	s.mu.Unlock()
	if errors.Is(err, launcher.ErrSessionBusy) {
		return res, nil, errSessionBusy()
	}
	if errors.Is(err, launcher.ErrSessionClosed) {
		return res, nil, &sessionError{fmt.Sprintf("session closed while the call ran; call %s for a new session", toolSessionCreate)}
	}
	return res, info, err
}

// execShared is exec in a session of the SharedSessionStore.
func (s *sessions) execShared(ctx context.Context, owner, id string, job launcher.Job) (launcher.Result, *sessionInfo, error) {
	res, count, expires, err := s.o.Shared.Exec(ctx, id, owner, job)
	switch {
	case errors.Is(err, launcher.ErrSessionBusy):
		return res, nil, errSessionBusy()
	case errors.Is(err, launcher.ErrSessionGone):
		// Why, when this replica ended it (a GoneError); else "closed, expired, or
		// never existed" (another identity's handle gets the same).
		var gone *launcher.GoneError
		if !errors.As(err, &gone) {
			return res, nil, &sessionError{fmt.Sprintf("session_id not found: %s; call %s for a new session", err, toolSessionCreate)}
		}
		return res, nil, &sessionError{fmt.Sprintf("session %s; its variables and files are gone: call %s for a new session", gone.Why, toolSessionCreate)}
	case count == 0:
		return res, nil, err
	}
	return res, &sessionInfo{ID: id, ExecutionCount: count, State: res.SessionState, ExpiresAt: expires.UTC().Format(time.RFC3339)}, err
}

func errSessionBusy() error {
	return &sessionError{"session busy: another exec call is running in this session; wait for it to end (or cancel it) and call again; calls in one session run one at a time"}
}

// addTools adds session_create and session_close.
func (s *sessions) addTools(srv *mcp.Server, o Options) {
	f, t := false, true
	s.profiles = o.Egress
	mcp.AddTool(srv, &mcp.Tool{
		Name: toolSessionCreate,
		Description: fmt.Sprintf(`Start a Python session: an interpreter that keeps its variables, imports and the files in /tmp across exec calls. Pass the session_id it returns as exec's "session_id".

Each exec call in a session runs on what the earlier ones left; a call that fails with an exception keeps what ran before the exception. A call killed for its timeout, cancelled, or killed for memory leaves the variables as they were before it (state "rolled_back"); files it wrote in /tmp are NOT rolled back. If the interpreter itself dies the session starts again empty (state "lost"). One call at a time: a second call while one runs gets a "busy" error.

The session ends after %s without a call (each call restarts that clock), %s after it was created in any case, with session_close, or when the server restarts; then its variables and files are gone and exec with its session_id fails saying so. Memory: %s for the interpreter and each call together. At most %d sessions at once on this server: close the ones you no longer need.`,
			s.o.IdleTimeout, s.o.MaxLifetime, size(int(s.o.Memory)), s.o.Max) + sessionEgressNote(o),
		InputSchema: sessionCreateSchema(o),
		Annotations: &mcp.ToolAnnotations{Title: "Start a Python session", DestructiveHint: &f, OpenWorldHint: &f},
	}, s.create)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        toolSessionClose,
		Description: "End a session started by session_create and free its memory: its variables and files are gone. Closing a session that has already ended is not an error.",
		Annotations: &mcp.ToolAnnotations{Title: "End a Python session", DestructiveHint: &t, IdempotentHint: true, OpenWorldHint: &f},
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

// sessionEgressNote is what session_create's description adds with egress profiles.
func sessionEgressNote(o Options) string {
	if len(o.Egress) == 0 || o.Sessions.Shared != nil {
		return ""
	}
	return "\n\nEgress: with \"egress\" set to a profile's name, every exec call in the session may reach that profile's hosts over HTTP and HTTPS through a proxy (HTTP_PROXY and HTTPS_PROXY are set; TLS is end to end; a refused host, port or address is answered 403 with the reason), within the profile's caps, which count per call; there is still no DNS, no UDP and no other way out. The profile is fixed for the session: exec calls with its session_id leave \"egress\" out. Without it the session has no network at all. " + egressList(o.Egress)
}

// sessionsNote is what exec's description adds when sessions are on.
func sessionsNote() string {
	return `

Sessions: with "session_id" (from session_create) the program runs in that session instead of a new sandbox: it sees the variables, imports and /tmp files the session's earlier calls left, and the result adds "session" (id, execution_count, state, expires_at). Without session_id, everything above holds: nothing persists.`
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
