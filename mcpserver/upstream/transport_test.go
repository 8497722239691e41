package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRedirectToAnotherOrigin: an upstream that redirects to another origin is
// refused with an error naming it, and the other origin never sees the configured
// headers, Authorization or not: neither through the refusal, nor (the second guard)
// when a redirect is followed. A redirect within the origin keeps them.
func TestRedirectToAnotherOrigin(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // server: the headers it saw
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = append(seen[name], r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	}
	other := httptest.NewServer(record("other"))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/mcp", record("home"))
	home := httptest.NewServer(mux)
	t.Cleanup(home.Close)

	s := Server{Name: "gh", URL: home.URL + "/away", Headers: map[string]string{"Authorization": "Bearer s3cret", "X-Api-Key": "k3y"}}
	c := httpClient(s, 1<<20, http.DefaultTransport)
	_, err := c.Post(home.URL+"/away", "application/json", strings.NewReader(`{}`))
	if err == nil || !strings.Contains(err.Error(), `upstream "gh" redirected to another origin, http://127.0.0.1:`) {
		t.Errorf("redirect to another origin: got error %v, want it refused naming the origin", err)
	}
	c.CheckRedirect = nil // followed: the headers still stay home
	if _, err := c.Post(home.URL+"/away", "application/json", strings.NewReader(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := httpClient(s, 1<<20, http.DefaultTransport).Post(home.URL+"/here", "application/json", strings.NewReader(`{}`)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := seen["other"]; len(got) != 1 || got[0] != "|" {
		t.Errorf("the other origin saw %q, want one request without the headers", got)
	}
	if got := seen["home"]; len(got) != 1 || got[0] != "Bearer s3cret|k3y" {
		t.Errorf("home saw %q, want one request with the headers", got)
	}
}

// TestWireReadsAnAnswerUpToTheLimit: an HTTP upstream's JSON answer to a call over the
// limit is read no further than the limit, and replaced with the error answering the
// call; one that fits passes as it came.
func TestWireReadsAnAnswerUpToTheLimit(t *testing.T) {
	const limit, size = 1 << 20, 40 << 20
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var req struct{ Method string }
		json.NewDecoder(r.Body).Decode(&req)
		if req.Method == "small" {
			io.WriteString(w, `{"jsonrpc":"2.0","id":8,"result":{}}`)
			return
		}
		io.WriteString(w, `{"jsonrpc":"2.0","id":9,"result":{"t":"`)
		for range size / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		io.WriteString(w, `"}}`)
	}))
	t.Cleanup(hs.Close)
	read := &counting{base: http.DefaultTransport}
	c := httpClient(Server{Name: "big", URL: hs.URL}, limit, read)
	post := func(body string) string {
		t.Helper()
		resp, err := c.Post(hs.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := post(`{"jsonrpc":"2.0","id":"call-9","method":"tools/call"}`), string(tooLargeReply(json.RawMessage(`"call-9"`), -1)); got != want {
		t.Errorf("the large answer: got %.200q, want %q", got, want)
	}
	if n := read.n.Load(); n > limit+1+64<<10 {
		t.Errorf("read %d bytes of a %d-byte answer, want at most the limit, %d, and a buffer", n, size, limit)
	}
	if got, want := post(`{"jsonrpc":"2.0","id":8,"method":"small"}`), `{"jsonrpc":"2.0","id":8,"result":{}}`; got != want {
		t.Errorf("the small answer: got %q, want %q", got, want)
	}
}

// counting counts the bytes read of the responses' bodies.
type counting struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, &c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
