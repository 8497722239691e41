package httpauth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// settle waits for the key fetch under way, if any, to end.
func settle(v *verifier) {
	v.mu.Lock()
	fc := v.flight
	v.mu.Unlock()
	if fc != nil {
		<-fc.done
	}
}

func bearerOf(tok string) func(http.Header) {
	return func(h http.Header) { h.Set("Authorization", "Bearer "+tok) }
}

// TestKeyFetchRedirects: a key set behind a redirect is fetched only when the
// redirect stays on the same scheme, host and port; a redirect to plain http
// or to another host is refused, and New fails naming it.
func TestKeyFetchRedirects(t *testing.T) {
	is := newTestIssuer(t)
	is.addKey("rsa", "k1", true)
	redirector := func(tls bool, to string) *httptest.Server {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) })
		var s *httptest.Server
		if tls {
			s = httptest.NewTLSServer(h)
		} else {
			s = httptest.NewServer(h)
		}
		t.Cleanup(s.Close)
		return s
	}
	toHTTP := redirector(true, is.URL+"/jwks")   // https -> http, and another host
	toOther := redirector(false, is.URL+"/jwks") // http on loopback -> another port
	cases := []struct {
		name    string
		jwks    string
		client  *http.Client
		refused bool
	}{
		{"https redirected to http", toHTTP.URL + "/jwks", toHTTP.Client(), true},
		{"redirected to another host", toOther.URL + "/jwks", nil, true},
		{"redirected on the same host", is.URL + "/jwks-moved", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := is.fetches.Load()
			_, err := New(t.Context(), Options{OAuth: &OAuthOptions{
				Issuer: is.URL, Resource: testResource, JWKSURL: tc.jwks, HTTPClient: tc.client}})
			switch {
			case tc.refused && (err == nil || !strings.Contains(err.Error(), "redirect")):
				t.Errorf("New: %v, want an error about the redirect", err)
			case tc.refused && is.fetches.Load() != before:
				t.Errorf("the redirect was followed to the issuer's key set")
			case !tc.refused && err != nil:
				t.Errorf("New: %v, want the keys fetched through the same-host redirect", err)
			}
		})
	}
	// The client the caller passed is not changed.
	if toHTTP.Client().CheckRedirect != nil {
		t.Error("the caller's HTTP client got a redirect policy")
	}
}

// TestSlowIssuerStallsOnlyUnknownKeys: while a fetch for an unknown kid waits
// on a slow issuer, tokens of known keys are verified at once; every unknown
// kid that arrives meanwhile shares that one fetch; and a flood of made-up kids
// fetches at most once per MinRefreshInterval.
func TestSlowIssuerStallsOnlyUnknownKeys(t *testing.T) {
	is, g := oauthGuard(t, "")
	h := g.Wrap(ok)
	var clockMu sync.Mutex
	clock := time.Now()
	g.oauth.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	advance := func(d time.Duration) { clockMu.Lock(); clock = clock.Add(d); clockMu.Unlock() }
	claims := goodClaims(is.URL, testResource, time.Now())
	known := is.sign("k1", "", claims)
	madeUp := func(i int) string { return signAs(t, is, "k1", fmt.Sprintf("made-up-%d", i), claims) }

	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	is.hold.Store(&release)
	advance(31 * time.Second) // past the rate limit of the fetch at start

	flood := func(n, from int) chan int {
		codes := make(chan int, n)
		for i := range n {
			go func() { codes <- send(t, h, bearerOf(madeUp(from+i))).status }()
		}
		return codes
	}
	waiting := flood(50, 0)
	for deadline := time.Now().Add(10 * time.Second); is.fetches.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("no key fetch started for an unknown kid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The issuer is stuck. A known key does not wait for it.
	done := make(chan int, 1)
	go func() { done <- send(t, h, bearerOf(known)).status }()
	select {
	case code := <-done:
		if code != 200 {
			t.Errorf("known key while a fetch is stuck: HTTP %d, want 200", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("a token of a known key waited for the stuck fetch of another kid's keys")
	}
	open()
	for range 50 {
		if code := <-waiting; code != 401 {
			t.Errorf("made-up kid: HTTP %d, want 401", code)
		}
	}
	if got := is.fetches.Load(); got != 2 {
		t.Errorf("%d JWKS fetches for 50 made-up kids at once, want 2 (the start, and one shared)", got)
	}
	// Within the rate limit a flood fetches nothing; past it, once.
	for _, step := range []struct {
		advance time.Duration
		want    int64
	}{{0, 2}, {31 * time.Second, 3}} {
		advance(step.advance)
		codes := flood(100, 1000)
		for range 100 {
			if code := <-codes; code != 401 {
				t.Errorf("made-up kid: HTTP %d, want 401", code)
			}
		}
		if got := is.fetches.Load(); got != step.want {
			t.Errorf("%d JWKS fetches after a flood of 100 made-up kids, want %d", got, step.want)
		}
	}
	settle(g.oauth)
}

// TestUnknownKidGivesUpWithItsRequest: a verification waiting for a stuck
// fetch ends when its request does.
func TestUnknownKidGivesUpWithItsRequest(t *testing.T) {
	is, g := oauthGuard(t, "")
	release := make(chan struct{})
	t.Cleanup(func() { close(release); settle(g.oauth) })
	is.hold.Store(&release)
	g.oauth.now = func() time.Time { return time.Now().Add(time.Minute) }
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	tok := signAs(t, is, "k1", "made-up", goodClaims(is.URL, testResource, time.Now()))
	if _, err := g.oauth.verify(ctx, tok); err == nil {
		t.Fatal("a made-up kid verified")
	}
	if ctx.Err() == nil {
		t.Error("the verification returned before its context ended, want it to wait for the fetch")
	}
}

// TestKeysExpireWhenRefreshesFail: while the issuer cannot be reached the keys
// fetched before serve until MaxKeyAge after the last successful fetch; then
// every JWT is refused, until a fetch succeeds again.
func TestKeysExpireWhenRefreshesFail(t *testing.T) {
	is, g := oauthGuard(t, "")
	h := g.Wrap(ok)
	clock := time.Now()
	g.oauth.now = func() time.Time { return clock }
	try := func(what string, want int) {
		t.Helper()
		p := send(t, h, bearerOf(is.sign("k1", "", goodClaims(is.URL, testResource, clock))))
		settle(g.oauth)
		if p.status != want {
			t.Errorf("%s: HTTP %d, want %d", what, p.status, want)
		}
	}
	is.down.Store(true)
	clock = clock.Add(59 * time.Minute)
	try("59 minutes after the last fetch, the issuer down", 200)
	clock = clock.Add(2 * time.Minute)
	try("61 minutes after the last fetch, the issuer down", 401)
	is.down.Store(false)
	clock = clock.Add(31 * time.Second)
	try("the issuer back", 200)
}

// TestTokenType: typ at+jwt and JWT, with or without application/ and in any
// case, and no typ at all, are accepted; any other typ is refused.
func TestTokenType(t *testing.T) {
	is, g := oauthGuard(t, "")
	h := g.Wrap(ok)
	c := goodClaims(is.URL, testResource, time.Now())
	is.mu.Lock()
	k1 := is.keys["k1"]
	is.mu.Unlock()
	withTyp := func(typ any) string {
		o := &jose.SignerOptions{}
		if typ != nil {
			o = o.WithHeader(jose.HeaderType, typ)
		}
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k1}, o)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(s).Claims(c).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tc := range []struct {
		typ  any
		want int
	}{
		{"at+jwt", 200}, {"AT+JWT", 200}, {"application/at+jwt", 200}, {"Application/At+JWT", 200},
		{"JWT", 200}, {"jwt", 200}, {"application/jwt", 200}, {nil, 200},
		{"", 401}, {"JOSE", 401}, {"dpop+jwt", 401}, {"logout+jwt", 401}, {"secevent+jwt", 401},
		{"application/json", 401}, {"at+jwt ", 401}, {"x-at+jwt", 401}, {1, 401}, {[]string{"at+jwt"}, 401},
	} {
		if got := send(t, h, bearerOf(withTyp(tc.typ))).status; got != tc.want {
			t.Errorf("typ %#v: HTTP %d, want %d", tc.typ, got, tc.want)
		}
	}
}
