package httpauth

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/rs/zerolog"
)

const testResource = "https://mcp.example.test/mcp"

// ok is the guarded handler: it answers 200 and the user it saw.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		io.WriteString(w, ti.UserID)
	}
})

// watchedBody records whether anyone read it.
type watchedBody struct{ read atomic.Bool }

func (b *watchedBody) Read(p []byte) (int, error) { b.read.Store(true); return 0, io.EOF }
func (b *watchedBody) Close() error               { return nil }

type probe struct {
	status int
	header http.Header
	body   string
	read   bool // the request body was read
}

func send(t *testing.T, h http.Handler, set func(http.Header)) probe {
	t.Helper()
	body := &watchedBody{}
	req := httptest.NewRequest(http.MethodPost, "/mcp", body)
	if set != nil {
		set(req.Header)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return probe{rec.Code, rec.Header(), rec.Body.String(), body.read.Load()}
}

func TestNoCredentialConfiguredIsNoGuard(t *testing.T) {
	g, err := New(t.Context(), Options{})
	if err != nil || g != nil {
		t.Fatalf("New(Options{}) = %v, %v; want nil, nil", g, err)
	}
	if got := send(t, g.Wrap(ok), nil).status; got != http.StatusOK {
		t.Errorf("unguarded request: HTTP %d, want 200", got)
	}
}

func TestStaticToken(t *testing.T) {
	const token = "s3cret-token-0123456789"
	g, err := New(t.Context(), Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Wrap(ok)
	set := func(kv ...string) func(http.Header) {
		return func(h http.Header) {
			for i := 0; i < len(kv); i += 2 {
				h.Add(kv[i], kv[i+1])
			}
		}
	}
	cases := []struct {
		name      string
		set       func(http.Header)
		want      int
		challenge string // WWW-Authenticate of a 401
	}{
		{"X-MCP-AUTH", set("X-MCP-AUTH", token), 200, ""},
		{"Bearer", set("Authorization", "Bearer "+token), 200, ""},
		{"bearer in lower case", set("Authorization", "bearer "+token), 200, ""},
		{"both, equal", set("X-MCP-AUTH", token, "Authorization", "Bearer "+token), 200, ""},
		{"none", nil, 401, "Bearer"},
		{"both, Bearer wrong", set("X-MCP-AUTH", token, "Authorization", "Bearer x"+token), 401, `Bearer error="invalid_token"`},
		{"both, X-MCP-AUTH wrong", set("X-MCP-AUTH", "x"+token, "Authorization", "Bearer "+token), 401, `Bearer error="invalid_token"`},
		{"wrong X-MCP-AUTH", set("X-MCP-AUTH", "wrong"), 401, `Bearer error="invalid_token"`},
		{"wrong Bearer", set("Authorization", "Bearer wrong"), 401, `Bearer error="invalid_token"`},
		{"empty X-MCP-AUTH", set("X-MCP-AUTH", ""), 401, `Bearer error="invalid_token"`},
		{"empty Bearer", set("Authorization", "Bearer "), 401, `Bearer error="invalid_token"`},
		{"scheme alone", set("Authorization", "Bearer"), 401, `Bearer error="invalid_token"`},
		{"empty Authorization", set("Authorization", ""), 401, `Bearer error="invalid_token"`},
		{"Basic scheme", set("Authorization", "Basic "+token), 401, `Bearer error="invalid_token"`},
		{"Token scheme", set("Authorization", "Token "+token), 401, `Bearer error="invalid_token"`},
		{"no scheme", set("Authorization", token), 401, `Bearer error="invalid_token"`},
		{"Bearer with a second word", set("Authorization", "Bearer "+token+" x"), 401, `Bearer error="invalid_token"`},
		{"prefix", set("X-MCP-AUTH", token[:len(token)-1]), 401, `Bearer error="invalid_token"`},
		{"suffix", set("Authorization", "Bearer "+token+"x"), 401, `Bearer error="invalid_token"`},
		{"X-MCP-AUTH twice", set("X-MCP-AUTH", token, "X-MCP-AUTH", token), 401, `Bearer error="invalid_token"`},
		{"Authorization twice", set("Authorization", "Bearer "+token, "Authorization", "Bearer "+token), 401, `Bearer error="invalid_token"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := send(t, h, tc.set)
			if p.status != tc.want {
				t.Fatalf("got HTTP %d, want %d", p.status, tc.want)
			}
			if tc.want != 401 {
				return
			}
			if got := p.header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if p.body != "Unauthorized\n" {
				t.Errorf("body %q, want %q", p.body, "Unauthorized\n")
			}
			if p.read {
				t.Error("the refused request's body was read")
			}
			for k, vs := range p.header {
				if strings.Contains(strings.Join(vs, " "), token) {
					t.Errorf("header %s carries the token", k)
				}
			}
		})
	}
}

// oauthGuard returns an issuer with an RSA key k1 (alg pinned in the JWKS) and
// an EC key k2 (not pinned), and a guard trusting it for testResource with the
// scope mcp:exec and, when token is set, a static token too.
func oauthGuard(t *testing.T, token string) (*testIssuer, *Guard) {
	t.Helper()
	is := newTestIssuer(t)
	is.addKey("rsa", "k1", true)
	is.addKey("ec", "k2", false)
	g, err := New(t.Context(), Options{
		Token:  token,
		OAuth:  &OAuthOptions{Issuer: is.URL, Resource: testResource, Scopes: []string{"mcp:exec"}},
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	return is, g
}

func TestOAuth(t *testing.T) {
	const static = "static-token-0123456789"
	is, g := oauthGuard(t, static)
	h := g.Wrap(ok)
	now := time.Now()
	good := func(edit func(*tokenClaims)) tokenClaims {
		c := goodClaims(is.URL, testResource, now)
		if edit != nil {
			edit(&c)
		}
		return c
	}
	// An RSA key of the issuer's that it never published.
	is.addKey("rsa", "unpublished", true)
	is.dropKeys("k1")
	is.addKeyPublic("k2")
	k1Pub := is.public("k1")
	der, err := x509.MarshalPKIXPublicKey(k1Pub.Key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})

	bearer := func(tok string) func(http.Header) {
		return func(h http.Header) { h.Set("Authorization", "Bearer "+tok) }
	}
	metaURL := "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
	invalid := `Bearer error="invalid_token", resource_metadata="` + metaURL + `", scope="mcp:exec"`
	cases := []struct {
		name      string
		set       func(http.Header)
		want      int
		challenge string
	}{
		{"valid RS256", bearer(is.sign("k1", "", good(nil))), 200, ""},
		{"valid ES256", bearer(is.sign("k2", "", good(nil))), 200, ""},
		{"scope as an scp array", bearer(is.sign("k1", "", map[string]any{
			"iss": is.URL, "sub": "u", "aud": testResource, "exp": now.Add(time.Minute).Unix(), "scp": []string{"mcp:exec"}})), 200, ""},
		{"audience among several", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Audience = jwt.Audience{"other", testResource} }))), 200, ""},
		{"expired within the leeway", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Expiry = jwt.NewNumericDate(now.Add(-10 * time.Second)) }))), 200, ""},
		{"static token as Bearer", bearer(static), 200, ""},
		{"static token as X-MCP-AUTH", func(h http.Header) { h.Set("X-MCP-AUTH", static) }, 200, ""},

		{"no credential", nil, 401, `Bearer resource_metadata="` + metaURL + `", scope="mcp:exec"`},
		{"expired", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Expiry = jwt.NewNumericDate(now.Add(-2 * time.Minute)) }))), 401, invalid},
		{"no exp", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Expiry = nil }))), 401, invalid},
		{"not yet valid", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.NotBefore = jwt.NewNumericDate(now.Add(5 * time.Minute)) }))), 401, invalid},
		{"issued in the future", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.IssuedAt = jwt.NewNumericDate(now.Add(5 * time.Minute)) }))), 401, invalid},
		{"wrong audience", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Audience = jwt.Audience{"https://other.example.test/mcp"} }))), 401, invalid},
		{"no audience", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Audience = nil }))), 401, invalid},
		{"wrong issuer", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Issuer = "https://evil.example.test" }))), 401, invalid},
		{"issuer with a trailing slash", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Issuer = is.URL + "/" }))), 401, invalid},
		{"unknown key", bearer(is.sign("unpublished", "", good(nil))), 401, invalid},
		{"JWT in X-MCP-AUTH", func(h http.Header) { h.Set("X-MCP-AUTH", is.sign("k1", "", good(nil))) }, 401, invalid},
		{"garbage", bearer("not.a.jwt"), 401, invalid},
		{"tampered payload", bearer(tamper(t, is.sign("k1", "", good(nil)))), 401, invalid},
		{"alg none", bearer(unsigned(t, "k1", good(nil))), 401, invalid},
		{"HS256 keyed with the RSA public key (PEM)", bearer(hmacSigned(t, "k1", pemKey, good(nil))), 401, invalid},
		{"HS256 keyed with the RSA public key (DER)", bearer(hmacSigned(t, "k1", der, good(nil))), 401, invalid},
		{"PS256 with a key pinned to RS256", bearer(is.sign("k1", jose.PS256, good(nil))), 401, invalid},
		{"RS256 signature under the EC key's kid", bearer(signAs(t, is, "k1", "k2", good(nil))), 401, invalid},

		{"missing scope", bearer(is.sign("k1", "", good(func(c *tokenClaims) { c.Scope = "openid mcp:read" }))), 403,
			`Bearer error="insufficient_scope", resource_metadata="` + metaURL + `", scope="mcp:exec"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := send(t, h, tc.set)
			if p.status != tc.want {
				t.Fatalf("got HTTP %d, want %d (WWW-Authenticate %q)", p.status, tc.want, p.header.Get("WWW-Authenticate"))
			}
			if tc.want == 200 {
				return
			}
			if got := p.header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate\n %s\nwant\n %s", got, tc.challenge)
			}
			if want := http.StatusText(tc.want) + "\n"; p.body != want {
				t.Errorf("body %q, want %q", p.body, want)
			}
			if p.read {
				t.Error("the refused request's body was read")
			}
		})
	}

	// The user behind an OAuth token reaches the SDK (which binds sessions to it).
	if p := send(t, h, bearer(is.sign("k1", "", good(nil)))); p.body != is.URL+" user-1" {
		t.Errorf("the handler saw user %q, want %q", p.body, is.URL+" user-1")
	}
}

// addKeyPublic publishes kid's public key again (after dropKeys).
func (is *testIssuer) addKeyPublic(kid string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	k := is.keys[kid]
	pub := k.Public()
	if kid == "k2" {
		pub.Algorithm = ""
	}
	is.pub = append(is.pub, pub)
}

func (is *testIssuer) public(kid string) jose.JSONWebKey {
	is.mu.Lock()
	defer is.mu.Unlock()
	k := is.keys[kid]
	return k.Public()
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unsigned is an alg "none" token.
func unsigned(t *testing.T, kid string, c any) string {
	return b64(mustJSON(t, map[string]string{"alg": "none", "kid": kid, "typ": "JWT"})) + "." + b64(mustJSON(t, c)) + "."
}

// hmacSigned is an HS256 token whose secret is key: the confusion attack, where
// a verifier that lets the token pick the algorithm uses the public key as the
// HMAC secret.
func hmacSigned(t *testing.T, kid string, key []byte, c any) string {
	t.Helper()
	return sign(t, jose.HS256, key, kid, c)
}

// signAs signs with key signer's private key but names kid in the header.
func signAs(t *testing.T, is *testIssuer, signer, kid string, c any) string {
	t.Helper()
	is.mu.Lock()
	k := is.keys[signer]
	is.mu.Unlock()
	return sign(t, jose.RS256, k.Key, kid, c)
}

// sign signs claims c with key under alg, naming kid in the header.
func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, c any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tamper changes the subject of a signed token without signing it again.
func tamper(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["sub"] = "admin"
	parts[1] = b64(mustJSON(t, m))
	return strings.Join(parts, ".")
}

func TestKeyRotation(t *testing.T) {
	is, g := oauthGuard(t, "")
	h := g.Wrap(ok)
	clock := time.Now()
	g.oauth.now = func() time.Time { return clock }
	claims := func() tokenClaims { return goodClaims(is.URL, testResource, clock) }
	bearer := func(tok string) func(http.Header) {
		return func(h http.Header) { h.Set("Authorization", "Bearer "+tok) }
	}
	if got := is.fetches.Load(); got != 1 {
		t.Fatalf("%d JWKS fetches at start, want 1", got)
	}
	old := is.sign("k1", "", claims())
	if p := send(t, h, bearer(old)); p.status != 200 {
		t.Fatalf("token of the first key: HTTP %d, want 200", p.status)
	}

	// The issuer rotates: k3 is published, k1 withdrawn.
	is.addKey("rsa", "k3", true)
	is.dropKeys("k3")
	fresh := is.sign("k3", "", claims())

	// Within the rate limit an unknown kid fetches nothing, however often it comes.
	for range 20 {
		if p := send(t, h, bearer(fresh)); p.status != 401 {
			t.Fatalf("new key within the rate limit: HTTP %d, want 401", p.status)
		}
	}
	if got := is.fetches.Load(); got != 1 {
		t.Fatalf("%d JWKS fetches after 20 unknown-key tokens within the rate limit, want 1", got)
	}
	// Once the limit has passed, the unknown kid fetches the set once and is found.
	clock = clock.Add(31 * time.Second)
	if p := send(t, h, bearer(fresh)); p.status != 200 {
		t.Fatalf("new key after the rate limit: HTTP %d, want 200", p.status)
	}
	if got := is.fetches.Load(); got != 2 {
		t.Fatalf("%d JWKS fetches after the rotation, want 2", got)
	}
	// The withdrawn key's tokens are refused now, without a fetch (rate limit).
	if p := send(t, h, bearer(old)); p.status != 401 {
		t.Errorf("token of the withdrawn key: HTTP %d, want 401", p.status)
	}
	if got := is.fetches.Load(); got != 2 {
		t.Errorf("%d JWKS fetches, want still 2", got)
	}

	// Periodic refresh: after RefreshInterval even a known kid refetches.
	clock = clock.Add(15 * time.Minute)
	if p := send(t, h, bearer(is.sign("k3", "", goodClaims(is.URL, testResource, clock)))); p.status != 200 {
		t.Fatalf("known key after the refresh interval: HTTP %d, want 200", p.status)
	}
	settle(g.oauth) // that refresh runs in the background
	if got := is.fetches.Load(); got != 3 {
		t.Errorf("%d JWKS fetches after the refresh interval, want 3", got)
	}

	// An issuer that fails keeps the keys fetched before.
	is.down.Store(true)
	clock = clock.Add(16 * time.Minute)
	if p := send(t, h, bearer(is.sign("k3", "", goodClaims(is.URL, testResource, clock)))); p.status != 200 {
		t.Errorf("known key while the issuer is down: HTTP %d, want 200", p.status)
	}
	settle(g.oauth)
}

func TestMetadata(t *testing.T) {
	is, g := oauthGuard(t, "")
	if got, want := g.MetadataPaths(), []string{MetadataPath, MetadataPath + "/mcp"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("MetadataPaths() = %v, want %v", got, want)
	}
	rec := httptest.NewRecorder()
	g.MetadataHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MetadataPath+"/mcp", nil))
	var m struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
		BearerMethods        []string `json:"bearer_methods_supported"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("metadata %q: %v", rec.Body, err)
	}
	if m.Resource != testResource || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != is.URL ||
		strings.Join(m.ScopesSupported, " ") != "mcp:exec" || strings.Join(m.BearerMethods, " ") != "header" {
		t.Errorf("metadata %+v, want resource %s, issuer %s, scope mcp:exec, bearer in header", m, testResource, is.URL)
	}
	if got := MetadataURL("https://h.example/a/b/"); got != "https://h.example/.well-known/oauth-protected-resource/a/b" {
		t.Errorf("MetadataURL = %q", got)
	}
}

func TestNewRefusesBadIssuers(t *testing.T) {
	is := newTestIssuer(t)
	is.addKey("rsa", "k1", true)
	hmacOnly := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "h", Algorithm: "HS256"}}})
	}))
	t.Cleanup(hmacOnly.Close)
	cases := []struct {
		name string
		o    OAuthOptions
		want string
	}{
		{"plain http off loopback", OAuthOptions{Issuer: "http://issuer.example.test", Resource: testResource}, "must be https"},
		{"no resource", OAuthOptions{Issuer: is.URL}, "resource"},
		{"relative resource", OAuthOptions{Issuer: is.URL, Resource: "/mcp"}, "resource"},
		{"issuer without metadata", OAuthOptions{Issuer: is.URL + "/tenant", Resource: testResource}, "discovering"},
		{"JWKS with only an HMAC key", OAuthOptions{Issuer: is.URL, Resource: testResource, JWKSURL: hmacOnly.URL}, "no public signing key"},
		{"JWKS over plain http off loopback", OAuthOptions{Issuer: is.URL, Resource: testResource, JWKSURL: "http://keys.example.test/jwks"}, "must be https"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(t.Context(), Options{OAuth: &tc.o})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The algorithm pin on its own: HMAC and "none" tokens do not even parse, so
// neither a key-type check nor the JWKS filter is the only line of defence.
func TestAlgorithmPin(t *testing.T) {
	c := goodClaims("https://issuer.example.test", testResource, time.Now())
	for name, tok := range map[string]string{
		"HS256": hmacSigned(t, "k", []byte("0123456789abcdef0123456789abcdef"), c),
		"none":  unsigned(t, "k", c),
	} {
		if _, err := jwt.ParseSigned(tok, allowedAlgs); err == nil {
			t.Errorf("a %s token parsed with the allowed algorithms, want an error", name)
		}
	}
}
