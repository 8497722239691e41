package httpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/rs/zerolog"
)

// OAuthOptions configures the OAuth resource server. Zero durations mean their
// documented defaults.
type OAuthOptions struct {
	// Issuer is the authorization server's issuer identifier; a token's "iss"
	// must equal it exactly. Required: https, or http on a loopback address.
	Issuer string
	// Resource is the canonical URL of this server's MCP endpoint, e.g.
	// https://mcp.example.com/mcp: the "resource" of the protected-resource
	// metadata. Required.
	Resource string
	// Audience is the value a token's "aud" must contain. "" means Resource,
	// as the MCP authorization spec has clients ask for (RFC 8707).
	Audience string
	// Scopes are required, all of them, in the token's "scope" (space-separated)
	// or "scp" (array) claim. Empty: none required.
	Scopes []string
	// JWKSURL is where the issuer's signing keys are. "" means the jwks_uri of
	// the issuer's metadata (RFC 8414, then OpenID Connect discovery).
	JWKSURL string
	// RefreshInterval is how old the key set may grow before it is fetched again
	// (on the next verification). Zero means 15 minutes.
	RefreshInterval time.Duration
	// MinRefreshInterval rate-limits the fetches that a token with an unknown
	// key id triggers (a key rotation): at most one per interval, however many
	// different unknown key ids arrive. Zero means 30 s.
	MinRefreshInterval time.Duration
	// MaxKeyAge is how long keys stay usable after the last fetch that
	// succeeded: past it, while refreshes keep failing, every JWT is refused
	// (fail closed), so that a key the issuer withdrew is not trusted for ever
	// by a server that cannot reach it. Zero means 1 hour.
	MaxKeyAge time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat. Zero means 30 s.
	Leeway time.Duration
	// HTTPClient fetches metadata and keys. nil means a client with a 10 s
	// timeout. Whichever client, its redirects are restricted (sameOrigin).
	HTTPClient *http.Client
}

// allowedAlgs are the signature algorithms a token may use: asymmetric only.
// "none" and HS* are absent, so a token signed with a public key as an HMAC
// secret (the classic confusion) is refused by the parser itself.
var allowedAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// Limits on what the issuer sends.
const (
	maxMetadataBytes = 1 << 20
	maxTokenBytes    = 16 << 10
)

// errRefused is a token that is not valid; why is for tests and debug logs only.
var errRefused = errors.New("token refused")

// errScope is a valid token that lacks a required scope.
var errScope = errors.New("insufficient scope")

// claims are the parts of an access token that are checked.
type claims struct {
	jwt.Claims
	Scope    string   `json:"scope"`
	Scp      []string `json:"scp"`
	ClientID string   `json:"client_id"`
}

func (c *claims) scopes() []string {
	return append(strings.Fields(c.Scope), c.Scp...)
}

// verifier checks JWT access tokens against the issuer's keys.
//
// No lock is held while the issuer is asked for keys: a fetch runs on its own
// (one at a time, shared by every verification that needs it), so a slow
// issuer stalls only the tokens whose key is not known yet, never those
// verified with keys at hand.
type verifier struct {
	opts OAuthOptions
	log  zerolog.Logger
	now  func() time.Time // tests move the clock

	mu      sync.Mutex // guards the fields below; never held across a fetch
	keys    map[string]jose.JSONWebKey
	fetched time.Time  // last fetch started, success or not
	loaded  time.Time  // last fetch that succeeded
	flight  *fetchCall // the fetch under way, or nil
}

// fetchCall is one fetch of the key set, shared by whoever waits for it.
type fetchCall struct {
	done chan struct{} // closed when the fetch has ended
}

// newVerifier resolves the JWKS URL (discovery) and fetches the keys once, so
// that a misconfiguration stops the server at start rather than refusing every
// client later.
func newVerifier(ctx context.Context, o OAuthOptions, log zerolog.Logger) (*verifier, error) {
	if err := checkURL(o.Issuer); err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	if o.Resource == "" {
		return nil, errors.New("resource: must be set to the server's public MCP URL")
	}
	if u, err := url.Parse(o.Resource); err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "" {
		return nil, fmt.Errorf("resource: must be an absolute URL without a fragment, got %q", o.Resource)
	}
	if o.Audience == "" {
		o.Audience = o.Resource
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 15 * time.Minute
	}
	if o.MinRefreshInterval <= 0 {
		o.MinRefreshInterval = 30 * time.Second
	}
	if o.Leeway <= 0 {
		o.Leeway = 30 * time.Second
	}
	if o.MaxKeyAge <= 0 {
		o.MaxKeyAge = time.Hour
	}
	hc := http.Client{Timeout: 10 * time.Second}
	if o.HTTPClient != nil {
		hc = *o.HTTPClient
	}
	hc.CheckRedirect = sameOrigin
	o.HTTPClient = &hc
	if o.JWKSURL == "" {
		u, err := discoverJWKS(ctx, o.HTTPClient, o.Issuer)
		if err != nil {
			return nil, fmt.Errorf("discovering the issuer's keys: %w", err)
		}
		o.JWKSURL = u
	}
	if err := checkURL(o.JWKSURL); err != nil {
		return nil, fmt.Errorf("JWKS URL: %w", err)
	}
	v := &verifier{opts: o, log: log, now: time.Now}
	keys, err := v.get(ctx)
	if err != nil {
		return nil, err
	}
	v.keys, v.fetched, v.loaded = keys, v.now(), v.now()
	return v, nil
}

// maxRedirects bounds the redirects a metadata or key fetch follows.
const maxRedirects = 3

// sameOrigin is the redirect policy of every fetch from the issuer: a redirect
// is followed only to the same scheme, host and port. Keys reached through a
// redirect to plain http could be forged on the way, and one to another host
// would let an open redirector on the issuer's host (common on login servers)
// choose the keys that sign tokens.
func sameOrigin(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case len(via) >= maxRedirects:
		return fmt.Errorf("more than %d redirects from %s", maxRedirects, first.Redacted())
	case req.URL.Scheme != first.Scheme || req.URL.Host != first.Host:
		return fmt.Errorf("refusing the redirect from %s to %s: another scheme or host", first.Redacted(), req.URL.Redacted())
	}
	return nil
}

// checkURL accepts https URLs, and http ones on a loopback address (tests,
// development): keys fetched over plain HTTP from elsewhere could be forged.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return fmt.Errorf("must be an absolute URL, got %q", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("must be https (http only on a loopback address), got %q", s)
}

// discoverJWKS reads the issuer's metadata, RFC 8414 first, then OpenID
// Connect discovery, and returns its jwks_uri. The metadata must name the same
// issuer (RFC 8414 §3.3), or a compromised proxy could point at other keys.
func discoverJWKS(ctx context.Context, hc *http.Client, issuer string) (string, error) {
	u, _ := url.Parse(issuer)
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	candidates := []string{
		u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + path,
		u.Scheme + "://" + u.Host + path + "/.well-known/openid-configuration",
	}
	var errs []error
	for _, c := range candidates {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := getJSON(ctx, hc, c, &meta); err != nil {
			errs = append(errs, err)
			continue
		}
		if meta.Issuer != issuer {
			return "", fmt.Errorf("%s names issuer %q, want %q", c, meta.Issuer, issuer)
		}
		if meta.JWKSURI == "" {
			return "", fmt.Errorf("%s has no jwks_uri", c)
		}
		return meta.JWKSURI, nil
	}
	return "", errors.Join(errs...)
}

func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching %s: HTTP %d", u, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", u, err)
	}
	if len(b) > maxMetadataBytes {
		return fmt.Errorf("reading %s: larger than %d bytes", u, maxMetadataBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding %s: %w", u, err)
	}
	return nil
}

// get fetches the key set. Only public signing keys are kept: a symmetric or
// private key, or one marked for encryption, is dropped.
func (v *verifier) get(ctx context.Context) (map[string]jose.JSONWebKey, error) {
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, v.opts.HTTPClient, v.opts.JWKSURL, &set); err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	keys := make(map[string]jose.JSONWebKey, len(set.Keys))
	for _, k := range set.Keys {
		if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		keys[k.KeyID] = k
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("fetching the issuer's keys: %s holds no public signing key", v.opts.JWKSURL)
	}
	return keys, nil
}

// startFetch returns the fetch under way, or starts one. It runs detached
// from any caller's context (it is shared; getJSON bounds it to 10 s), and
// replaces the keys only when it succeeds. v.mu must be held.
func (v *verifier) startFetch(ctx context.Context) *fetchCall {
	if v.flight != nil {
		return v.flight
	}
	fc := &fetchCall{done: make(chan struct{})}
	v.flight, v.fetched = fc, v.now()
	go func() {
		defer close(fc.done)
		keys, err := v.get(context.WithoutCancel(ctx))
		v.mu.Lock()
		defer v.mu.Unlock()
		v.flight = nil
		if err != nil {
			v.log.Warn().Err(err).Time("keys_fetched", v.loaded).Msg("oauth: refreshing the issuer's keys failed; keeping the keys fetched before until they are too old")
			return
		}
		v.keys, v.loaded = keys, v.now()
		v.log.Debug().Int("keys", len(keys)).Msg("oauth: fetched the issuer's keys")
	}()
	return fc
}

// key returns the key for kid. A set older than RefreshInterval is fetched
// again in the background, the verification going on with the keys at hand.
// An unknown kid (a rotation) waits for a fetch, at most one started per
// MinRefreshInterval, so that a flood of made-up key ids cannot hammer the
// issuer. Keys whose last successful fetch is older than MaxKeyAge are not
// used: the verification waits for a fetch as for an unknown kid, and fails
// if it fails.
func (v *verifier) key(ctx context.Context, kid string) (jose.JSONWebKey, bool) {
	v.mu.Lock()
	now := v.now()
	age := now.Sub(v.fetched)
	fresh := now.Sub(v.loaded) < v.opts.MaxKeyAge
	k, ok := v.lookup(kid)
	ok = ok && fresh
	var fc *fetchCall
	switch {
	case !ok && (age >= v.opts.MinRefreshInterval || v.flight != nil):
		fc = v.startFetch(ctx)
	case ok && age >= v.opts.RefreshInterval:
		v.startFetch(ctx) // not waited for
	}
	v.mu.Unlock()
	if fc == nil {
		return k, ok
	}
	select {
	case <-fc.done:
	case <-ctx.Done():
		return jose.JSONWebKey{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.now().Sub(v.loaded) >= v.opts.MaxKeyAge {
		return jose.JSONWebKey{}, false
	}
	return v.lookup(kid)
}

// lookup finds kid; a token without a kid is accepted only while the issuer
// has a single key.
func (v *verifier) lookup(kid string) (jose.JSONWebKey, bool) {
	if kid == "" && len(v.keys) == 1 {
		for _, k := range v.keys {
			return k, true
		}
	}
	k, ok := v.keys[kid]
	return k, ok && kid != ""
}

// typeAccepted says whether a token's typ header is one an access token may
// carry: "at+jwt" (RFC 9068 §2.1) or the generic "JWT" (RFC 7519 §5.1, what
// many issuers still send), each with or without the "application/" prefix
// and in any case (RFC 7515 §4.1.9). A token without typ is accepted too:
// the header is optional in RFC 7515, and widely used issuers (Amazon Cognito,
// Okta's custom authorization servers) send access tokens without it. Any
// other type (an ID token marked as such, a logout or DPoP proof, a security
// event) is refused, so a JWT made for another purpose cannot pass as access.
func typeAccepted(typ any) bool {
	if typ == nil {
		return true
	}
	s, ok := typ.(string)
	if !ok {
		return false
	}
	s = strings.ToLower(s)
	s = strings.TrimPrefix(s, "application/")
	return s == "at+jwt" || s == "jwt"
}

// verify checks raw and returns its claims. Its errors wrap errRefused or
// errScope; the detail is for debug logs, never for the client.
func (v *verifier) verify(ctx context.Context, raw string) (*claims, error) {
	if len(raw) > maxTokenBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", errRefused, maxTokenBytes)
	}
	tok, err := jwt.ParseSigned(raw, allowedAlgs)
	if err != nil {
		return nil, fmt.Errorf("%w: parsing: %v", errRefused, err)
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: %d signatures", errRefused, len(tok.Headers))
	}
	h := tok.Headers[0]
	if !typeAccepted(h.ExtraHeaders[jose.HeaderType]) {
		return nil, fmt.Errorf("%w: typ %v is not an access token's", errRefused, h.ExtraHeaders[jose.HeaderType])
	}
	k, ok := v.key(ctx, h.KeyID)
	if !ok {
		return nil, fmt.Errorf("%w: unknown key id %q", errRefused, h.KeyID)
	}
	// A key that names its algorithm is used with that one only.
	if k.Algorithm != "" && k.Algorithm != h.Algorithm {
		return nil, fmt.Errorf("%w: token alg %s, key alg %s", errRefused, h.Algorithm, k.Algorithm)
	}
	var c claims
	if err := tok.Claims(k.Key, &c); err != nil { // also refuses a key of the wrong type for alg
		return nil, fmt.Errorf("%w: signature: %v", errRefused, err)
	}
	if c.Expiry == nil {
		return nil, fmt.Errorf("%w: no exp", errRefused)
	}
	err = c.ValidateWithLeeway(jwt.Expected{
		Issuer:      v.opts.Issuer,
		AnyAudience: jwt.Audience{v.opts.Audience},
		Time:        v.now(),
	}, v.opts.Leeway)
	if err != nil {
		return nil, fmt.Errorf("%w: claims: %v", errRefused, err)
	}
	have := c.scopes()
	for _, s := range v.opts.Scopes {
		if !slices.Contains(have, s) {
			return &c, fmt.Errorf("%w: %q missing", errScope, s)
		}
	}
	return &c, nil
}
