package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// Manager keeps one client session per upstream server: it connects at Start, lists
// the allowed tools (every page), lists them again on tools/list_changed, and
// reconnects with backoff when a session ends. A server that is down does not stop
// the others: calls to its tools fail with ErrUnavailable.
type Manager struct {
	cfg     *Config
	log     zerolog.Logger
	version string
	conns   []*conn // in cfg.Servers' order

	// Backoff between connection attempts: from minBackoff, doubling, at most
	// maxBackoff. Tests shorten them.
	minBackoff, maxBackoff time.Duration
}

// ErrUnavailable: the upstream server is not connected.
var ErrUnavailable = errors.New("upstream server unavailable")

type conn struct {
	srv Server

	mu       sync.Mutex
	session  *mcp.ClientSession
	tools    []*mcp.Tool // allowed and listed, in name order
	lastErr  string      // why the last attempt or session failed; metadata only
	tried    chan struct{}
	triedOne sync.Once
}

// New returns a Manager for cfg; nothing connects before Start.
func New(cfg *Config, version string, log zerolog.Logger) *Manager {
	m := &Manager{cfg: cfg, log: log, version: version, minBackoff: time.Second, maxBackoff: 30 * time.Second}
	for _, s := range cfg.Servers {
		m.conns = append(m.conns, &conn{srv: s, tried: make(chan struct{})})
	}
	return m
}

// Limits are the per-exec limits of the configuration.
func (m *Manager) Limits() Limits { return m.cfg.Limits }

// Start connects to every server in the background until ctx ends, and waits at most
// wait for each to have been tried once (connected or failed), so that the first
// catalog and the tool description see the servers that are up.
func (m *Manager) Start(ctx context.Context, wait time.Duration) {
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
		cs, err := m.connect(ctx, c)
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

// connect opens a session. A stdio server runs as our child with a minimal
// environment: PATH and the server's own env, nothing of ours.
func (m *Manager) connect(ctx context.Context, c *conn) (*mcp.ClientSession, error) {
	var t mcp.Transport
	if c.srv.Command != "" {
		cmd := exec.CommandContext(ctx, c.srv.Command, c.srv.Args...)
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		for k, v := range c.srv.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: c.srv.URL,
			HTTPClient: &http.Client{Transport: headers{c.srv.Headers, http.DefaultTransport}}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-exec", Version: m.version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			go func() {
				lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := m.list(lctx, c, req.Session); err != nil {
					m.log.Warn().Str("upstream", c.srv.Name).Err(err).Msg("listing tools after list_changed")
				}
			}()
		},
	})
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
	Connected bool
	Tools     int
	Error     string
}

// Status reports every server's state.
func (m *Manager) Status() []Status {
	var out []Status
	for _, c := range m.conns {
		c.mu.Lock()
		out = append(out, Status{Name: c.srv.Name, Connected: c.session != nil, Tools: len(c.tools), Error: c.lastErr})
		c.mu.Unlock()
	}
	return out
}

// call runs one allowed tool on its server's session.
func (m *Manager) call(ctx context.Context, c *conn, tool string, args any) (*mcp.CallToolResult, error) {
	c.mu.Lock()
	cs := c.session
	c.mu.Unlock()
	if cs == nil {
		return nil, ErrUnavailable
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return res, err
}

// headers adds the configured headers to every request to an HTTP upstream.
type headers struct {
	h    map[string]string
	base http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.h {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}
