package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Manager keeps a client session per upstream server, its main session: it connects
// at Start, lists the allowed tools (every page), lists them again on
// tools/list_changed, and reconnects with backoff when the session ends. A server
// that is down does not stop the others: calls to its tools fail with ErrUnavailable.
//
// Calls go on the main session for a shared server and for the identity ""
// (stdio, the static token, no auth: every caller is that one identity). Otherwise
// each identity gets a session of its own, opened at its first call, so that what one
// caller leaves in a stateful upstream another cannot read: at most
// Config.MaxSessions per server at once (a further identity's calls fail as
// unavailable, naming the flag), each closed after Config.IdleTimeout without a call.
type Manager struct {
	cfg     *Config
	log     zerolog.Logger
	version string
	conns   []*conn // in cfg.Servers' order
	limit   int     // bytes of one message from an upstream (messageLimit)
	ctx     context.Context

	maxSessions int
	idle        time.Duration
	vars        backend.Vars

	// Backoff between connection attempts: from minBackoff, doubling, at most
	// maxBackoff. Tests shorten them.
	minBackoff, maxBackoff time.Duration
}

// ErrUnavailable: the upstream server is not connected.
var ErrUnavailable = errors.New("upstream server unavailable")

// The settings that bound the callers' sessions (Config.MaxSessions, IdleTimeout).
const (
	SettingMaxSessions backend.Setting = "upstream-max-sessions"
	SettingIdleTimeout backend.Setting = "upstream-idle-timeout-s"
)

// unavailableError is ErrUnavailable with its cause, which errors.Unwrap returns.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string        { return ErrUnavailable.Error() + ": " + e.cause.Error() }
func (e *unavailableError) Unwrap() error        { return e.cause }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

type conn struct {
	srv Server

	mu       sync.Mutex
	session  *mcp.ClientSession // the main session
	tools    []*mcp.Tool        // allowed and listed, in name order
	lastErr  string             // why the last attempt or session failed; metadata only
	tried    chan struct{}
	triedOne sync.Once
	owned    map[string]*owned // the identities' own sessions, by identity
}

// owned is one identity's session with a server that is not shared.
type owned struct {
	ready    chan struct{} // closed when the attempt to connect ended
	cs       *mcp.ClientSession
	err      error
	inFlight int
	lastUsed time.Time
}

// Defaults of Config.MaxSessions and Config.IdleTimeout.
const (
	DefaultMaxSessions = 16
	DefaultIdleTimeout = 5 * time.Minute
)

// New returns a Manager for cfg; nothing connects before Start.
func New(cfg *Config, version string, log zerolog.Logger) *Manager {
	m := &Manager{cfg: cfg, log: log, version: version, limit: messageLimit(cfg.Limits), ctx: context.Background(),
		maxSessions: cmp.Or(cfg.MaxSessions, DefaultMaxSessions), idle: cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout),
		vars:       cfg.Vars,
		minBackoff: time.Second, maxBackoff: 30 * time.Second}
	for _, s := range cfg.Servers {
		m.conns = append(m.conns, &conn{srv: s, tried: make(chan struct{}), owned: map[string]*owned{}})
	}
	return m
}

type identityKey struct{}

// WithIdentity is ctx for the calls of one caller, identity as mcpserver has it (an
// OAuth issuer and subject, or ""): an exec's calls under it go on that identity's
// session.
func WithIdentity(ctx context.Context, identity string) context.Context {
	return context.WithValue(ctx, identityKey{}, identity)
}

func identityOf(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}

// Limits are the per-exec limits of the configuration.
func (m *Manager) Limits() Limits { return m.cfg.Limits }

// Start connects to every server in the background until ctx ends, and waits at most
// wait for each to have been tried once (connected or failed), so that the first
// catalog and the tool description see the servers that are up.
func (m *Manager) Start(ctx context.Context, wait time.Duration) {
	m.ctx = ctx
	go m.sweep(ctx)
	for _, c := range m.conns {
		go m.run(ctx, c)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for _, c := range m.conns {
		select {
		case <-c.tried:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (m *Manager) run(ctx context.Context, c *conn) {
	backoff := m.minBackoff
	for ctx.Err() == nil {
		began := time.Now()
		cs, err := m.connect(ctx, c, true)
		if err == nil {
			err = m.list(ctx, c, cs)
			if err == nil {
				c.triedOne.Do(func() { close(c.tried) })
				m.log.Info().Str("upstream", c.srv.Name).Int("tools", len(c.snapshot())).Msg("upstream connected")
				stop := context.AfterFunc(ctx, func() { cs.Close() })
				err = cs.Wait()
				stop()
				if err == nil {
					err = errors.New("the session ended")
				}
			}
			cs.Close()
		}
		c.mu.Lock()
		c.session, c.lastErr = nil, err.Error()
		c.mu.Unlock()
		c.triedOne.Do(func() { close(c.tried) })
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > m.maxBackoff {
			backoff = m.minBackoff // it was up for a while: start over
		}
		m.log.Warn().Str("upstream", c.srv.Name).Err(err).Dur("retry_in", backoff).Msg("upstream not connected")
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, m.maxBackoff)
	}
}

// connect opens a session: the main one (which lists the tools) or an identity's. A
// stdio server runs as our child with a minimal environment: PATH and the server's
// own env, nothing of ours.
func (m *Manager) connect(ctx context.Context, c *conn, main bool) (*mcp.ClientSession, error) {
	var t mcp.Transport
	if c.srv.Command != "" {
		cmd := exec.CommandContext(ctx, c.srv.Command, c.srv.Args...)
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		for k, v := range c.srv.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		t = &stdioTransport{cmd: cmd, limit: m.limit}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: httpClient(c.srv, m.limit, http.DefaultTransport)}
	}
	opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
	if main {
		opts.ToolListChangedHandler = func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			go func() {
				lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := m.list(lctx, c, req.Session); err != nil {
					m.log.Warn().Str("upstream", c.srv.Name).Err(err).Msg("listing tools after list_changed")
				}
			}()
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-exec", Version: m.version}, opts)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return cs, nil
}

// list replaces c's tools with the allowed ones cs lists, every page.
func (m *Manager) list(ctx context.Context, c *conn, cs *mcp.ClientSession) error {
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if c.srv.Allowed(t.Name) {
			tools = append(tools, t)
		}
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	c.mu.Lock()
	c.session, c.tools, c.lastErr = cs, tools, ""
	c.mu.Unlock()
	return nil
}

func (c *conn) snapshot() []*mcp.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tools
}

func (m *Manager) conn(server string) *conn {
	for _, c := range m.conns {
		if c.srv.Name == server {
			return c
		}
	}
	return nil
}

// Status is one server's state, for /readyz: metadata only.
type Status struct {
	Name      string
	Connected bool // the main session
	Tools     int
	Sessions  int // identities' own sessions, open or opening
	Error     string
}

// Status reports every server's state.
func (m *Manager) Status() []Status {
	var out []Status
	for _, c := range m.conns {
		c.mu.Lock()
		out = append(out, Status{Name: c.srv.Name, Connected: c.session != nil, Tools: len(c.tools), Sessions: len(c.owned), Error: c.lastErr})
		c.mu.Unlock()
	}
	return out
}

// call runs one allowed tool on the session of ctx's identity (WithIdentity).
func (m *Manager) call(ctx context.Context, c *conn, tool string, args any) (*mcp.CallToolResult, error) {
	cs, release, err := m.session(ctx, c, identityOf(ctx))
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	var werr *jsonrpc.Error
	switch {
	case err == nil:
	case errors.As(err, &werr) && werr.Code == codeTooLarge:
		var d tooLargeData
		if json.Unmarshal(werr.Data, &d) != nil {
			d.Bytes = -1
		}
		return nil, &ResultTooLargeError{Server: c.srv.Name, Bytes: d.Bytes, Limit: m.limit}
	case ctx.Err() == nil:
		return nil, &unavailableError{err}
	}
	return res, err
}

// session is the session a call of identity's goes on, and what to call when the call
// has ended.
func (m *Manager) session(ctx context.Context, c *conn, identity string) (*mcp.ClientSession, func(), error) {
	c.mu.Lock()
	main, why := c.session, c.lastErr
	if main == nil { // down: the main session's backoff paces the attempts
		c.mu.Unlock()
		return nil, nil, &unavailableError{errors.New(cmp.Or(why, "not connected yet"))}
	}
	if c.srv.Shared || identity == "" {
		c.mu.Unlock()
		return main, func() {}, nil
	}
	o := c.owned[identity]
	if o == nil {
		if len(c.owned) >= m.maxSessions {
			c.mu.Unlock()
			m.log.Warn().Str("upstream", c.srv.Name).Int("sessions", m.maxSessions).Msg("upstream call refused: every session is taken")
			return nil, nil, &unavailableError{fmt.Errorf("it has a session open for each of %d other identities, the most it may have (%s); one closes after %s without a call (%s)", m.maxSessions, m.vars.Name(SettingMaxSessions), m.idle, SettingIdleTimeout)}
		}
		o = &owned{ready: make(chan struct{})}
		c.owned[identity] = o
		go m.open(c, identity, o)
	}
	o.inFlight++
	c.mu.Unlock()
	release := func() {
		c.mu.Lock()
		o.inFlight--
		o.lastUsed = time.Now()
		c.mu.Unlock()
	}
	select {
	case <-o.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if o.err != nil {
		release()
		return nil, nil, &unavailableError{o.err}
	}
	return o.cs, release, nil
}

// open connects identity's session o, and forgets it when it ends.
func (m *Manager) open(c *conn, identity string, o *owned) {
	cs, err := m.connect(m.ctx, c, false)
	c.mu.Lock()
	o.cs, o.err, o.lastUsed = cs, err, time.Now()
	if err != nil {
		c.forget(identity, o) // the next call tries again
	}
	n := len(c.owned)
	c.mu.Unlock()
	close(o.ready)
	if err != nil {
		m.log.Warn().Str("upstream", c.srv.Name).Err(err).Msg("opening a caller's upstream session")
		return
	}
	m.log.Info().Str("upstream", c.srv.Name).Int("sessions", n).Msg("upstream session opened for a caller")
	stop := context.AfterFunc(m.ctx, func() { cs.Close() })
	go func() {
		cs.Wait()
		stop()
		c.mu.Lock()
		c.forget(identity, o)
		n := len(c.owned)
		c.mu.Unlock()
		m.log.Info().Str("upstream", c.srv.Name).Int("sessions", n).Msg("upstream session for a caller closed")
	}()
}

// forget drops identity's session if it is still o; called with c.mu held.
func (c *conn) forget(identity string, o *owned) {
	if c.owned[identity] == o {
		delete(c.owned, identity)
	}
}

// sweep closes the identities' sessions idle for m.idle, until ctx ends.
func (m *Manager) sweep(ctx context.Context) {
	t := time.NewTicker(min(max(m.idle/4, 10*time.Millisecond), 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			var idle []*mcp.ClientSession
			for _, c := range m.conns {
				c.mu.Lock()
				for id, o := range c.owned {
					if o.cs != nil && o.inFlight == 0 && now.Sub(o.lastUsed) >= m.idle {
						delete(c.owned, id)
						idle = append(idle, o.cs)
					}
				}
				c.mu.Unlock()
			}
			for _, cs := range idle {
				cs.Close()
			}
		}
	}
}
