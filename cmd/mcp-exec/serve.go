package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
	"github.com/mcp-exec/mcp-exec/mcpserver"
	"github.com/mcp-exec/mcp-exec/mcpserver/httpauth"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

func serve(ctx context.Context, cfg config.Config, l *launcher.Launcher, m *metrics, log zerolog.Logger) error {
	var ups mcpserver.Upstreams
	if cfg.Upstreams != "" {
		ucfg, err := upstream.Load(cfg.Upstreams)
		if err != nil {
			return fmt.Errorf("--upstreams (MCP_EXEC_UPSTREAMS): %w", err)
		}
		ucfg.MaxSessions, ucfg.IdleTimeout, ucfg.Vars = cfg.UpstreamMaxSessions, cfg.UpstreamIdleTimeout, config.Var
		um := upstream.New(ucfg, version, log)
		um.Start(ctx, 10*time.Second) // the tool description lists the tools of those up by then
		ups, upstreams = um, um
	}
	srv := mcpserver.New(l, mcpserver.Options{
		Upstreams:      ups,
		Version:        version,
		MaxCodeBytes:   int(cfg.MaxCodeBytes),
		MaxStdinBytes:  int(cfg.MaxStdinBytes),
		MaxFiles:       cfg.MaxFiles,
		MaxFileBytes:   int(cfg.MaxFileBytes),
		MaxFilesBytes:  int(cfg.MaxFilesBytes),
		DefaultTimeout: cfg.DefaultTimeout,
		MaxTimeout:     cfg.MaxTimeout,
		Egress:         egressOf(l),
		Languages:      config.SplitList(cfg.Languages),
		Sessions:       sessionOptions(ctx, cfg, l, log),
		Runs:           runOptions(ctx, cfg, l, log),
		Logger:         log,
		Vars:           config.Var,
	})
	ready := readyHandler(l) // one, so that both listeners share its cache
	if cfg.MetricsAddr != "" && cfg.MetricsAddr != "off" {
		if err := serveMetrics(ctx, cfg.MetricsAddr, m, ready, log); err != nil {
			return err
		}
	}
	if cfg.Transport == "stdio" {
		if cfg.AuthOn() {
			log.Warn().Msg("the auth token and OAuth settings apply to http and sse only: stdio has no authentication (the client that starts the server owns it)")
		}
		return serveStdio(ctx, cfg, srv, l, log)
	}
	return serveHTTP(ctx, cfg, srv, l, m, ready, log)
}

// serveMetrics gives /metrics, /healthz and /readyz a listener of their own, for
// stdio deployments or to keep them off the MCP port. It has no authentication: who
// reaches it is for the operator's network to decide (Prometheus's habit), and so
// its /readyz says no more than a status and a fixed word.
func serveMetrics(ctx context.Context, addr string, m *metrics, ready *readyCache, log zerolog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s (--metrics-addr, MCP_EXEC_METRICS_ADDR): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.handler())
	addHealth(mux, ready, nil)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	context.AfterFunc(ctx, func() { hs.Close() })
	log.Info().Str("addr", ln.Addr().String()).Msg("serving metrics")
	return nil
}

// addHealth mounts /healthz and /readyz, which answer everyone: probes carry no
// credential. /readyz says why it is not ready, and how the upstreams are, only to a
// request that detail admits (the MCP endpoint's own check); everyone else, sandboxes
// that share the server's network included (standalone mode), gets the status code
// and a fixed word. nil detail admits no one.
func addHealth(mux *http.ServeMux, ready *readyCache, detail func(*http.Request) bool) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/readyz", readyz{ready, detail})
}

// upstreams is code mode's manager, for /readyz; nil without --upstreams.
var upstreams *upstream.Manager

// serveStdio serves until the client closes stdin or a signal arrives. On a signal
// the execs in flight get the grace period to finish before the session ends.
func serveStdio(ctx context.Context, cfg config.Config, srv *mcp.Server, l *launcher.Launcher, log zerolog.Logger) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	errc := make(chan error, 1)
	log.Info().Str("transport", "stdio").Msg("serving")
	// A line is one JSON-RPC message: it must fit the largest legal call.
	// params.task (MCP tasks) is lifted where the SDK keeps it (mcpserver.LiftTask).
	go func() {
		errc <- srv.Run(sctx, mcpserver.LiftTaskTransport(&mcp.StdioTransport{MaxLineLength: int(requestLimit(cfg))}))
	}()
	select {
	case err := <-errc:
		if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	drain(cfg, l, log)
	cancel()
	select {
	case <-errc:
	case <-time.After(5 * time.Second):
	}
	return nil
}

// drain lets the execs in flight finish within the grace period, then kills the rest
// and waits for their containers to be removed.
func drain(cfg config.Config, l *launcher.Launcher, log zerolog.Logger) {
	log.Info().Dur("grace", cfg.ShutdownGrace).Msg("shutting down: no new execs; waiting for those in flight")
	gctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := l.Close(gctx); err != nil {
		log.Warn().Err(err).Msg("closing launcher")
	}
}

func serveHTTP(ctx context.Context, cfg config.Config, srv *mcp.Server, l *launcher.Launcher, m *metrics, ready *readyCache, log zerolog.Logger) error {
	guard, err := newGuard(ctx, cfg, log)
	if err != nil {
		return err
	}
	lim := newHTTPLimits(cfg)
	bodyLimit := lim.max
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit(bodyLimit))
	}
	mux, path, err := httpMux(cfg, srv, guard, lim, m, ready)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s (--addr, MCP_EXEC_ADDR): %w", cfg.Addr, err)
	}
	// checkOpenDoor judged the address as written; this is where it bound ("localhost"
	// resolved).
	if !cfg.AuthOn() && !cfg.InsecureNoAuth && !isLoopback(ln.Addr()) {
		ln.Close()
		return fmt.Errorf("refusing to serve on %s (%s) without authentication: it is beyond loopback (%s)", ln.Addr(), cfg.Addr, config.Name("insecure-no-auth"))
	}
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	log.Info().Str("transport", cfg.Transport).Str("addr", ln.Addr().String()).Str("path", path).
		Bool("auth", cfg.TokenSet()).Bool("oauth", cfg.OAuthIssuer != "").Bool("stateless", cfg.Stateless).
		Int64("max_request_bytes", bodyLimit).Int64("memory_limit_bytes", debug.SetMemoryLimit(-1)).
		Int("max_requests", cap(lim.slots)).Dur("body_timeout", lim.bodyTimeout).Msg("serving")
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Stop accepting at once; requests in flight keep their connections while the
	// launcher gives their execs the grace period. Then close what is left (streams).
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	drain(cfg, l, log)
	time.Sleep(100 * time.Millisecond) // let handlers write their last results
	hs.Close()
	return nil
}

// httpMux routes the MCP endpoint (behind guard, then the body limit) at the path it
// returns, the OAuth metadata, /healthz, /readyz and, unless it has a listener of its
// own (--metrics-addr), /metrics behind guard.
func httpMux(cfg config.Config, srv *mcp.Server, guard *httpauth.Guard, lim httpLimits, m *metrics, ready *readyCache) (*http.ServeMux, string, error) {
	getServer := func(*http.Request) *mcp.Server { return srv }
	bodyLimit := lim.max
	// Authentication first, so that a request without credentials is refused before
	// its body is read or its size looked at; then the body limit.
	door := func(h http.Handler) http.Handler { return guard.Wrap(limitBody(lim, h)) }
	mux := http.NewServeMux()
	var path string
	switch cfg.Transport {
	case "http":
		path = "/mcp"
		// Inside the body limit, params.task (MCP tasks) is lifted where the SDK keeps it;
		// the lift may add a few bytes, which the SDK's own limit allows.
		mux.Handle(path, door(mcpserver.LiftTaskHandler(streamableHandler(getServer, bodyLimit+mcpserver.LiftTaskGrowth, cfg.Stateless))))
	case "sse":
		path = "/sse"
		mux.Handle(path, door(mcp.NewSSEHandler(getServer,
			&mcp.SSEOptions{MaxRequestBodyBytes: bodyLimit})))
	default:
		return nil, "", fmt.Errorf("unknown transport %q", cfg.Transport)
	}
	for _, p := range guard.MetadataPaths() {
		mux.Handle(p, guard.MetadataHandler())
	}
	addHealth(mux, ready, guard.Admits)
	if cfg.MetricsAddr == "" {
		// Behind the MCP endpoint's own door: this port is reachable by whoever may
		// try the MCP endpoint (in standalone mode, by the programs themselves).
		mux.Handle("/metrics", guard.Wrap(m.handler()))
	}
	return mux, path, nil
}

// readiness is what /readyz asks (a *launcher.Launcher).
type readiness interface {
	Check(ctx context.Context) error
	PoolStats() launcher.PoolStats
}

// readyTTL is how long /readyz reuses an answer. The endpoint is unauthenticated;
// without the cache a flood of hits would be a flood of engine calls.
const readyTTL = time.Second

// readyHandler answers 200 when the engine answers, the image is present and the warm
// pool (if any) has a sandbox ready; 503 otherwise, with a reason that reveals nothing
// about the deployment (readyz gives it to authenticated requests only). It asks at
// most once per readyTTL; hits that arrive while it asks wait for that answer.
func readyHandler(l readiness) *readyCache {
	return &readyCache{check: func(ctx context.Context) string { return notReady(ctx, l) }, now: time.Now}
}

// readyCache is the last readiness answer, and the check under way.
type readyCache struct {
	check func(context.Context) string
	now   func() time.Time

	mu     sync.Mutex
	at     time.Time // when reason was found; zero: never
	reason string
	flight chan struct{} // closed when the check under way ends; nil: none
}

// ServeHTTP answers with the reason and the upstreams' state: for a request that
// passed authentication (readyz).
func (c *readyCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, true)
}

func (c *readyCache) serve(w http.ResponseWriter, r *http.Request, detail bool) {
	reason := c.get(r.Context())
	switch {
	case reason != "" && detail:
		http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
		return
	case reason != "":
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
	if !detail {
		return
	}
	// Upstreams are reported, never failing readiness: the sandbox works without them.
	if upstreams != nil {
		for _, st := range upstreams.Status() {
			state := "connected"
			if !st.Connected {
				state = "unavailable"
			}
			fmt.Fprintf(w, "upstream %s: %s, %d tools\n", st.Name, state, st.Tools)
		}
	}
}

// readyz is /readyz: the cache's answer, in full for a request detail admits, else
// its status code and a fixed word ("ready", "not ready").
type readyz struct {
	c      *readyCache
	detail func(*http.Request) bool
}

func (h readyz) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.c.serve(w, r, h.detail != nil && h.detail(r))
}

func (c *readyCache) get(ctx context.Context) string {
	c.mu.Lock()
	if !c.at.IsZero() && c.now().Sub(c.at) < readyTTL {
		defer c.mu.Unlock()
		return c.reason
	}
	f := c.flight
	if f == nil {
		f = make(chan struct{})
		c.flight = f
		go func() {
			defer close(f)
			reason := c.check(context.WithoutCancel(ctx)) // shared: no caller may cancel it; notReady bounds it
			c.mu.Lock()
			defer c.mu.Unlock()
			c.reason, c.at, c.flight = reason, c.now(), nil
		}()
	}
	c.mu.Unlock()
	select {
	case <-f:
	case <-ctx.Done():
		return "check timed out"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

func notReady(ctx context.Context, l readiness) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch err := l.Check(ctx); {
	case errors.Is(err, launcher.ErrImageMissing):
		return "sandbox image missing"
	case err != nil:
		return "engine unreachable"
	}
	if st := l.PoolStats(); st.Size > 0 && st.Idle == 0 {
		return "warm pool empty"
	}
	return ""
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// sessionOptions offers sessions on the docker backend (Docker or Podman, under runc,
// crun or gVisor's runsc) and on the kubernetes backend (a pod per session that every
// replica serves: launcher/kube's SessionStore, whose sweeper runs until ctx ends),
// under the node's default runtime or the gVisor RuntimeClass. Not on the process
// backend, which cannot keep one run's memory, stdin and files from the next
// (docs/sessions.md): there the session tools are absent, and the log says why.
func sessionOptions(ctx context.Context, cfg config.Config, l *launcher.Launcher, log zerolog.Logger) mcpserver.SessionOptions {
	if cfg.MaxSessions == 0 {
		return mcpserver.SessionOptions{}
	}
	if cfg.Backend != "docker" && cfg.Backend != "kubernetes" {
		log.Info().Str("backend", cfg.Backend).Str("runtime", cfg.Runtime).Msg("sessions are not offered by this backend (docker or kubernetes only: the process backend cannot keep one run's memory, stdin and files from the next): no session tools")
		return mcpserver.SessionOptions{}
	}
	o := mcpserver.SessionOptions{
		Backend:        mcpserver.LauncherSessions{L: l},
		Max:            cfg.MaxSessions,
		MaxPerIdentity: cfg.MaxSessionsPerIdentity,
		IdleTimeout:    cfg.SessionIdleTimeout,
		MaxLifetime:    cfg.SessionMaxLifetime,
		Memory:         cfg.SessionMemory,
	}
	if kb, ok := l.Backend().(*kube.Backend); ok {
		store := kube.NewSessionStore(kb, log)
		go store.RunSweeper(ctx, sweepEvery(cfg.SessionIdleTimeout))
		o.Backend, o.Store, o.Attach = nil, store, mcpserver.LauncherSessions{L: l}
	}
	return o
}

// runOptions offers background runs: on the docker backend (Docker or Podman) and the
// process backend this server keeps them in its memory; on kubernetes each run is kept
// in its pod (kube.RunStore), so that every replica answers for every run, and every
// replica sweeps the results past their TTL.
func runOptions(ctx context.Context, cfg config.Config, l *launcher.Launcher, log zerolog.Logger) mcpserver.RunOptions {
	if cfg.MaxBackgroundRuns == 0 {
		return mcpserver.RunOptions{}
	}
	o := mcpserver.RunOptions{Max: cfg.MaxBackgroundRuns, MaxPerIdentity: cfg.MaxBackgroundRunsPerIdentity, TTL: cfg.RunTTL, MaxBytes: cfg.RunResultsMaxBytes}
	if kb, ok := l.Backend().(*kube.Backend); ok {
		if o.TTL <= 0 {
			o.TTL = 15 * time.Minute // mcpserver's default
		}
		store := kube.NewRunStore(kb, log, o.TTL)
		go store.RunSweeper(ctx, min(max(o.TTL/4, time.Second), 30*time.Second))
		o.Store, o.Sandboxes = store, mcpserver.LauncherRuns{L: l}
	}
	return o
}

// sweepEvery is how often every replica sweeps the shared sessions: a quarter of the
// idle timeout, between 1 s and 30 s (an expired session is also ended by the first
// call that finds it).
func sweepEvery(idle time.Duration) time.Duration {
	return min(max(idle/4, time.Second), 30*time.Second)
}
