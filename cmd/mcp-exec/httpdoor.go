package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/mcpserver/httpauth"
)

// newGuard builds the HTTP door from the configuration: nil (open) when
// neither a token nor an OAuth issuer is set. With an issuer it fetches the
// issuer's keys now, so a wrong issuer stops the start.
func newGuard(ctx context.Context, cfg config.Config, log zerolog.Logger) (*httpauth.Guard, error) {
	o := httpauth.Options{Token: cfg.AuthToken.Reveal(), TokenSHA256: cfg.TokenSum(), Logger: log}
	if cfg.OAuthIssuer != "" {
		o.OAuth = &httpauth.OAuthOptions{
			Issuer:   cfg.OAuthIssuer,
			Resource: cfg.OAuthResource,
			Audience: cfg.OAuthAudience,
			Scopes:   cfg.Scopes(),
			JWKSURL:  cfg.OAuthJWKSURL,
		}
	}
	g, err := httpauth.New(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.Name("oauth-issuer"), err)
	}
	return g, nil
}

// checkOpenDoor refuses to serve http/sse without authentication beyond loopback:
// exec is the most privileged tool an agent can hold, and such a server gives it to
// whoever reaches the port. --insecure-no-auth lets it through, logged as an error.
// stdio has no door, and a token or OAuth closes it.
func checkOpenDoor(cfg config.Config, log zerolog.Logger) error {
	if cfg.Transport == "stdio" || cfg.AuthOn() || loopbackAddr(cfg.Addr) {
		return nil
	}
	if cfg.InsecureNoAuth {
		log.Error().Str("addr", cfg.Addr).Msgf("UNSAFE: serving beyond loopback WITHOUT authentication (%s): anyone who reaches this port can run code", config.Name("insecure-no-auth"))
		return nil
	}
	return fmt.Errorf("refusing to serve %s on %s without authentication: that is beyond loopback, and anyone who reaches it could run code; "+
		"set a token (%s, %s or %s) or OAuth (%s), or listen on loopback (127.0.0.1:PORT); to serve it open anyway, at your own risk, set %s",
		cfg.Transport, cfg.Addr, config.AuthTokenEnv, config.Name("auth-token-file"), config.Name("auth-token-sha256"), config.Name("oauth-issuer"), config.Name("insecure-no-auth"))
}

// loopbackAddr reports whether a listen address (host:port) binds loopback only: a
// loopback IP (127.0.0.0/8, ::1) or localhost. An empty host (":8080") is every
// interface, and another name may resolve to any of them.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// statelessRevision is the first MCP revision without sessions (SEP-2575):
// every request carries its protocol version in the Mcp-Protocol-Version
// header and its _meta, and needs no initialize.
const statelessRevision = "2026-07-28"

// streamableHandler serves streamable HTTP. The SDK serves the stateless
// revision only from a handler in stateless mode (a stateful one answers it
// with HTTP 400 "protocol version ... is not supported"), while older clients
// keep their sessions (and with them cancellation by notification) only in
// stateful mode. So, unless the whole server is stateless, requests are routed
// by their Mcp-Protocol-Version header: the stateless revision and later go to
// a stateless handler, the rest (including initialize, which carries no such
// header) to the stateful one. Both serve the same mcp.Server.
//
// For the stateless revision the handler's context follows the HTTP request:
// a client that gives up on a call (closes its request) cancels it, and its
// sandbox is killed.
func streamableHandler(getServer func(*http.Request) *mcp.Server, bodyLimit int64, stateless bool) http.Handler {
	modern := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes:          bodyLimit,
		Stateless:                    true,
		PropagateRequestCancellation: true,
	})
	if stateless {
		return modern
	}
	legacy := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: bodyLimit})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= statelessRevision {
			modern.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	})
}
