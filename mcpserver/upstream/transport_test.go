package upstream

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	c := httpClient(s, http.DefaultTransport)
	_, err := c.Post(home.URL+"/away", "application/json", strings.NewReader(`{}`))
	if err == nil || !strings.Contains(err.Error(), `upstream "gh" redirected to another origin, http://127.0.0.1:`) {
		t.Errorf("redirect to another origin: got error %v, want it refused naming the origin", err)
	}
	c.CheckRedirect = nil // followed: the headers still stay home
	if _, err := c.Post(home.URL+"/away", "application/json", strings.NewReader(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := httpClient(s, http.DefaultTransport).Post(home.URL+"/here", "application/json", strings.NewReader(`{}`)); err != nil {
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
