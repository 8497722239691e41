package httpauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is an authorization server on loopback: RFC 8414 metadata and a
// JWKS of keys it generates, which a test can rotate. It counts JWKS fetches.
type testIssuer struct {
	t       *testing.T
	srv     *httptest.Server
	URL     string
	fetches atomic.Int64
	down    atomic.Bool                   // answer 503 to everything
	hold    atomic.Pointer[chan struct{}] // when set, a JWKS fetch waits for it to close

	mu   sync.Mutex
	keys map[string]jose.JSONWebKey // kid -> private key
	pub  []jose.JSONWebKey          // what the JWKS publishes
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	is := &testIssuer{t: t, keys: map[string]jose.JSONWebKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host // not is.URL: the server runs before it is set
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                           base,
			"jwks_uri":                         base + "/jwks",
			"authorization_endpoint":           base + "/authorize",
			"token_endpoint":                   base + "/token",
			"code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("/jwks-moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/jwks", http.StatusFound)
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		if c := is.hold.Load(); c != nil {
			<-*c
		}
		is.mu.Lock()
		defer is.mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: is.pub})
	})
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(is.srv.Close)
	is.URL = is.srv.URL
	return is
}

// addKey generates a key ("rsa" or "ec"), publishes its public half (with alg
// when pinAlg) and returns its kid.
func (is *testIssuer) addKey(kind, kid string, pinAlg bool) string {
	is.t.Helper()
	var priv crypto.Signer
	var alg jose.SignatureAlgorithm
	var err error
	switch kind {
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
		alg = jose.RS256
	case "ec":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		alg = jose.ES256
	}
	if err != nil {
		is.t.Fatal(err)
	}
	k := jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: string(alg), Use: "sig"}
	pub := k.Public()
	if !pinAlg {
		pub.Algorithm = ""
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys[kid] = k
	is.pub = append(is.pub, pub)
	return kid
}

// dropKeys unpublishes every key but keep (the key stays usable for signing).
func (is *testIssuer) dropKeys(keep string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	var pub []jose.JSONWebKey
	for _, k := range is.pub {
		if k.KeyID == keep {
			pub = append(pub, k)
		}
	}
	is.pub = pub
}

// sign makes a token with key kid and the algorithm alg (the key's own if "").
func (is *testIssuer) sign(kid string, alg jose.SignatureAlgorithm, c any) string {
	is.t.Helper()
	is.mu.Lock()
	k, ok := is.keys[kid]
	is.mu.Unlock()
	if !ok {
		is.t.Fatalf("no key %q", kid)
	}
	if alg == "" {
		alg = jose.SignatureAlgorithm(k.Algorithm)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: k},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		is.t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		is.t.Fatal(err)
	}
	return tok
}

// tokenClaims are the claims of a good token for resource; tests change them.
type tokenClaims struct {
	jwt.Claims
	Scope string `json:"scope,omitempty"`
}

func goodClaims(issuer, resource string, now time.Time) tokenClaims {
	return tokenClaims{
		Claims: jwt.Claims{
			Issuer:    issuer,
			Subject:   "user-1",
			Audience:  jwt.Audience{resource},
			Expiry:    jwt.NewNumericDate(now.Add(10 * time.Minute)),
			NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
			IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		},
		Scope: "mcp:exec openid",
	}
}
