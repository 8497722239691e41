package e2e_test

// OAuth end to end: the real binary as an OAuth resource server in front of an
// authorization server this test runs on loopback (RFC 8414 metadata and a
// JWKS of a key it generates). The binary discovers the keys at start, serves
// its RFC 9728 metadata unauthenticated, names it in WWW-Authenticate, and runs
// exec for the Go SDK's client holding a token from that issuer (2026-07-28
// and 2025-11-25), while an expired token, a token for another audience and a
// token without the scope are refused, and a session opened by one user cannot
// be used by another. Skipped with -short; outside CI a missing engine skips.

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

const oauthResource = "https://mcp-exec.test/mcp"

type oauthIssuer struct {
	URL    string
	signer jose.Signer
}

func newOAuthIssuer(t *testing.T) *oauthIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk := jose.JSONWebKey{Key: key, KeyID: "e2e-1", Algorithm: string(jose.RS256), Use: "sig"}
	is := &oauthIssuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host // not is.URL: the server runs before it is set
		json.NewEncoder(w).Encode(map[string]any{"issuer": base, "jwks_uri": base + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk.Public()}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	is.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jwk}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	return is
}

// token issues a token for sub; edit changes the claims first.
func (is *oauthIssuer) token(t *testing.T, sub string, edit func(*jwt.Claims, *string)) string {
	t.Helper()
	now := time.Now()
	c := jwt.Claims{Issuer: is.URL, Subject: sub, Audience: jwt.Audience{oauthResource},
		Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute)), IssuedAt: jwt.NewNumericDate(now)}
	scope := "mcp:exec"
	if edit != nil {
		edit(&c, &scope)
	}
	tok, err := jwt.Signed(is.signer).Claims(c).Claims(map[string]any{"scope": scope}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestOAuthResourceServer(t *testing.T) {
	is := newOAuthIssuer(t)
	bin, env := protoSetup(t, "MCP_EXEC_OAUTH_ISSUER="+is.URL, "MCP_EXEC_OAUTH_RESOURCE="+oauthResource,
		"MCP_EXEC_OAUTH_SCOPES=mcp:exec")
	srv := e2e.Serve(t, bin, env, "http", "oauth-"+strconv.Itoa(os.Getpid()), "")
	metaURL := "https://mcp-exec.test/.well-known/oauth-protected-resource/mcp"

	// The metadata, unauthenticated, at the path-specific and the root URL.
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(srv.Base + p)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Resource string   `json:"resource"`
			Servers  []string `json:"authorization_servers"`
		}
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil || m.Resource != oauthResource || len(m.Servers) != 1 || m.Servers[0] != is.URL {
			t.Errorf("GET %s: HTTP %d, %+v, %v; want the resource and its issuer", p, resp.StatusCode, m, err)
		}
	}

	post := func(set func(http.Header)) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.Endpoint, strings.NewReader(e2e.InitializeReq))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		set(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	bearer := func(tok string) func(http.Header) {
		return func(h http.Header) { h.Set("Authorization", "Bearer "+tok) }
	}
	refused := []struct {
		name      string
		set       func(http.Header)
		status    int
		challenge string
	}{
		{"no token", func(http.Header) {}, 401, `Bearer resource_metadata="` + metaURL + `", scope="mcp:exec"`},
		{"expired", bearer(is.token(t, "alice", func(c *jwt.Claims, _ *string) { c.Expiry = jwt.NewNumericDate(time.Now().Add(-time.Hour)) })),
			401, `Bearer error="invalid_token", resource_metadata="` + metaURL + `", scope="mcp:exec"`},
		{"another audience", bearer(is.token(t, "alice", func(c *jwt.Claims, _ *string) { c.Audience = jwt.Audience{"https://other.test/mcp"} })),
			401, `Bearer error="invalid_token", resource_metadata="` + metaURL + `", scope="mcp:exec"`},
		{"without the scope", bearer(is.token(t, "alice", func(_ *jwt.Claims, s *string) { *s = "mcp:read" })),
			403, `Bearer error="insufficient_scope", resource_metadata="` + metaURL + `", scope="mcp:exec"`},
	}
	for _, r := range refused {
		if code, h := post(r.set); code != r.status || h.Get("WWW-Authenticate") != r.challenge {
			t.Errorf("%s: HTTP %d, WWW-Authenticate %q; want %d, %q", r.name, code, h.Get("WWW-Authenticate"), r.status, r.challenge)
		}
	}

	// A session is bound to the user who opened it.
	code, h := post(bearer(is.token(t, "alice", nil)))
	sid := h.Get("Mcp-Session-Id")
	if code != 200 || sid == "" {
		t.Fatalf("initialize with alice's token: HTTP %d, session %q; want 200 and a session", code, sid)
	}
	code, _ = post(func(h http.Header) {
		bearer(is.token(t, "mallory", nil))(h)
		h.Set("Mcp-Session-Id", sid)
		h.Set("Mcp-Protocol-Version", "2025-06-18")
	})
	if code != http.StatusForbidden {
		t.Errorf("alice's session with mallory's valid token: HTTP %d, want 403", code)
	}

	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(rev, func(t *testing.T) {
			hc := &http.Client{Transport: bearerTransport{is.token(t, "alice", nil), http.DefaultTransport}}
			cs := protoConnect(t, &mcp.StreamableClientTransport{Endpoint: srv.Endpoint, HTTPClient: hc}, rev, nil)
			res, r := protoCall(t, cs, map[string]any{"code": "print('authorized')"}, nil)
			if res.IsError || r.Stdout != "authorized\n" {
				t.Errorf("exec with the token: isError %t, %+v", res.IsError, r)
			}
		})
	}
}
