package httpauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/rs/zerolog"
)

// HeaderToken is the header that carries the static token, besides
// Authorization: Bearer.
const HeaderToken = "X-MCP-AUTH"

// MetadataPath is where the protected-resource metadata is served (RFC 9728
// §3), and, with the resource's path appended, its path-specific twin.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Options configures a Guard.
type Options struct {
	// Token is the static token; "" means none.
	Token string
	// TokenSHA256 is the SHA-256 of a static token, for a server that must not hold
	// the token itself (where what it holds is readable, the digest gives nothing
	// away: a token of 32 random bytes has no feasible preimage); nil means none.
	TokenSHA256 []byte
	// OAuth turns on JWT access tokens; nil means off.
	OAuth *OAuthOptions
	// Logger gets debug lines on refusals (never the token) and key fetches.
	Logger zerolog.Logger
}

// A Guard admits requests that carry a valid credential.
//
// It does not verify through the SDK's auth.RequireBearerToken: that
// middleware reads only Authorization, and writes why a token failed ("token
// expired", the verifier's error) into the 401's body. The SDK's middleware is
// still used, after the Guard, to hand the verified TokenInfo to the
// streamable handler, which binds sessions to the user.
type Guard struct {
	token     []byte
	tokenSum  []byte // SHA-256 of a static token
	oauth     *verifier
	challenge string // the WWW-Authenticate parameters after "Bearer"
	log       zerolog.Logger
}

// New returns a Guard, or nil when o configures no credential at all (then
// there is nothing to guard). With OAuth it discovers and fetches the issuer's
// keys before returning, so a wrong issuer fails here.
func New(ctx context.Context, o Options) (*Guard, error) {
	if o.Token == "" && o.TokenSHA256 == nil && o.OAuth == nil {
		return nil, nil
	}
	if o.TokenSHA256 != nil && len(o.TokenSHA256) != sha256.Size {
		return nil, fmt.Errorf("the token's SHA-256 is %d bytes, want %d", len(o.TokenSHA256), sha256.Size)
	}
	g := &Guard{log: o.Logger, tokenSum: o.TokenSHA256}
	if o.Token != "" {
		g.token = []byte(o.Token)
	}
	if o.OAuth != nil {
		v, err := newVerifier(ctx, *o.OAuth, o.Logger)
		if err != nil {
			return nil, fmt.Errorf("setting up OAuth: %w", err)
		}
		g.oauth = v
		g.challenge = fmt.Sprintf("resource_metadata=%q", MetadataURL(v.opts.Resource))
		if len(v.opts.Scopes) > 0 {
			g.challenge += fmt.Sprintf(", scope=%q", strings.Join(v.opts.Scopes, " "))
		}
	}
	return g, nil
}

// MetadataURL is the RFC 9728 metadata URL of resource: the well-known path
// inserted between its host and its path.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + MetadataPath + strings.TrimSuffix(u.EscapedPath(), "/")
}

// Wrap returns next behind the guard. A nil Guard wraps nothing.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	if g == nil {
		return next
	}
	var withInfo http.Handler = next
	if g.oauth != nil {
		// The SDK binds a streamable HTTP session to the user who opened it when
		// the request context holds its TokenInfo; its middleware is the only way
		// in. The token was verified already: the verifier hands back the result.
		withInfo = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
			if ti, ok := ctx.Value(tokenInfoKey{}).(*auth.TokenInfo); ok {
				return ti, nil
			}
			return nil, auth.ErrInvalidToken
		}, &auth.RequireBearerTokenOptions{ClockSkew: g.oauth.opts.Leeway})(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti, status, why := g.admit(r)
		switch status {
		case 0:
		case http.StatusForbidden:
			g.log.Debug().Str("reason", why).Msg("auth: refused")
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", `+g.challenge)
			http.Error(w, http.StatusText(status), status)
			return
		default:
			g.log.Debug().Str("reason", why).Msg("auth: refused")
			w.Header().Set("WWW-Authenticate", g.challengeFor(r))
			http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
			return
		}
		if ti != nil {
			next := withInfo
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenInfoKey{}, ti)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

type tokenInfoKey struct{}

// Admits reports whether r carries a credential Wrap would let in, for a handler
// that answers everyone but tells more to whom it would admit (/readyz). A nil
// Guard admits every request, as it wraps nothing.
func (g *Guard) Admits(r *http.Request) bool {
	if g == nil {
		return true
	}
	_, status, _ := g.admit(r)
	return status == 0
}

// challengeFor is the WWW-Authenticate value of a 401: bare when the request
// carried no credential (RFC 6750 §3.1), error="invalid_token" when it did.
func (g *Guard) challengeFor(r *http.Request) string {
	var params []string
	if len(r.Header.Values("Authorization")) > 0 || len(r.Header.Values(HeaderToken)) > 0 {
		params = append(params, `error="invalid_token"`)
	}
	if g.challenge != "" {
		params = append(params, g.challenge)
	}
	if len(params) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(params, ", ")
}

// admit decides from the headers alone. It returns the SDK TokenInfo for an
// OAuth token, status 0 to let the request in, and otherwise the status and a
// reason for the debug log (never the token).
func (g *Guard) admit(r *http.Request) (*auth.TokenInfo, int, string) {
	tok, bearer, why := credential(r.Header)
	if why != "" {
		return nil, http.StatusUnauthorized, why
	}
	if g.token != nil && subtle.ConstantTimeCompare([]byte(tok), g.token) == 1 {
		return nil, 0, ""
	}
	if g.tokenSum != nil {
		if sum := sha256.Sum256([]byte(tok)); subtle.ConstantTimeCompare(sum[:], g.tokenSum) == 1 {
			return nil, 0, ""
		}
	}
	if g.oauth == nil || !bearer {
		return nil, http.StatusUnauthorized, "wrong token"
	}
	c, err := g.oauth.verify(r.Context(), tok)
	switch {
	case errors.Is(err, errScope):
		return nil, http.StatusForbidden, err.Error()
	case err != nil:
		return nil, http.StatusUnauthorized, err.Error()
	}
	ti := &auth.TokenInfo{Scopes: c.scopes(), Expiration: c.Expiry.Time(), UserID: c.Issuer + " " + c.Subject}
	return ti, 0, ""
}

// credential returns the one token a request presents: the value of
// X-MCP-AUTH, or of Authorization: Bearer, or of both when they are equal;
// bearer says whether it came in Authorization (only there may it be a JWT).
// A header given twice, an empty value, another scheme, or two values that
// differ present no token; why says which.
func credential(h http.Header) (tok string, bearer bool, why string) {
	xs, as := h.Values(HeaderToken), h.Values("Authorization")
	if len(xs) > 1 || len(as) > 1 {
		return "", false, "a credential header given more than once"
	}
	var x, b string
	if len(xs) == 1 {
		if x = xs[0]; x == "" {
			return "", false, "empty " + HeaderToken
		}
	}
	if len(as) == 1 {
		scheme, v, ok := strings.Cut(as[0], " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", false, "Authorization is not a Bearer credential"
		}
		if b = strings.TrimLeft(v, " "); b == "" || strings.ContainsAny(b, " \t") {
			return "", false, "malformed Bearer credential"
		}
	}
	switch {
	case x == "" && b == "":
		return "", false, "no credential"
	case x != "" && b != "" && subtle.ConstantTimeCompare([]byte(x), []byte(b)) != 1:
		return "", false, HeaderToken + " and Authorization differ"
	case b != "":
		return b, true, ""
	default:
		return x, false, ""
	}
}

// MetadataHandler serves the protected-resource metadata, or nil when OAuth is
// off. It answers unauthenticated, as clients fetch it before they have a token.
func (g *Guard) MetadataHandler() http.Handler {
	if g == nil || g.oauth == nil {
		return nil
	}
	o := g.oauth.opts
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               o.Resource,
		AuthorizationServers:   []string{o.Issuer},
		ScopesSupported:        o.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "mcp-exec",
	})
}

// MetadataPaths are the paths MetadataHandler should be mounted at: the
// path-specific one that MetadataURL names, and the root one that older
// clients try.
func (g *Guard) MetadataPaths() []string {
	if g == nil || g.oauth == nil {
		return nil
	}
	u, _ := url.Parse(MetadataURL(g.oauth.opts.Resource))
	paths := []string{MetadataPath}
	if u != nil && u.Path != MetadataPath {
		paths = append(paths, u.Path)
	}
	return paths
}
