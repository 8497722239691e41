package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/mcpserver"
)

// shutdownGrace is how long in-flight HTTP requests may take after a signal.
const shutdownGrace = 30 * time.Second

func serve(ctx context.Context, cfg Config, l *launcher.Launcher, log zerolog.Logger) error {
	srv := mcpserver.New(l, mcpserver.Options{
		Version:        version,
		MaxCodeBytes:   int(cfg.MaxCodeBytes),
		MaxStdinBytes:  int(cfg.MaxStdinBytes),
		MaxOutputBytes: int(cfg.MaxOutputBytes),
		DefaultTimeout: cfg.DefaultTimeout,
		MaxTimeout:     cfg.MaxTimeout,
		Python:         cfg.Python,
		Logger:         log,
	})
	if cfg.Transport == "stdio" {
		log.Info().Str("transport", "stdio").Msg("serving")
		err := srv.Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	return serveHTTP(ctx, cfg, srv, log)
}

func serveHTTP(ctx context.Context, cfg Config, srv *mcp.Server, log zerolog.Logger) error {
	getServer := func(*http.Request) *mcp.Server { return srv }
	// The body limit fits the largest legal call (code and stdin at their caps, JSON
	// escaping can grow text up to six times) and no more.
	bodyLimit := 6*(cfg.MaxCodeBytes+cfg.MaxStdinBytes) + 64<<10
	mux := http.NewServeMux()
	var path string
	switch cfg.Transport {
	case "http":
		path = "/mcp"
		mux.Handle(path, requireToken(cfg.AuthToken, mcp.NewStreamableHTTPHandler(getServer,
			&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: bodyLimit})))
	case "sse":
		path = "/sse"
		mux.Handle(path, requireToken(cfg.AuthToken, mcp.NewSSEHandler(getServer,
			&mcp.SSEOptions{MaxRequestBodyBytes: bodyLimit})))
	default:
		return fmt.Errorf("unknown transport %q", cfg.Transport)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s (--addr, MCP_EXEC_ADDR): %w", cfg.Addr, err)
	}
	if !cfg.TokenSet() && !isLoopback(ln.Addr()) {
		log.Warn().Str("addr", ln.Addr().String()).
			Msg("serving beyond loopback WITHOUT authentication: anyone who reaches this port can run code; set MCP_EXEC_AUTH_TOKEN")
	}
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	log.Info().Str("transport", cfg.Transport).Str("addr", ln.Addr().String()).Str("path", path).
		Bool("auth", cfg.TokenSet()).Msg("serving")
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// requireToken answers 401, with no detail, to any request whose X-MCP-AUTH header
// does not equal token. The comparison takes the same time wherever they differ.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("X-MCP-AUTH"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
