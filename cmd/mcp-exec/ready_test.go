package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/mcpserver/httpauth"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// countingEngine is a readiness whose Check counts its calls and, while gate is
// open (not closed), waits for it.
type countingEngine struct {
	calls atomic.Int64
	gate  chan struct{}
}

func (e *countingEngine) Check(ctx context.Context) error {
	e.calls.Add(1)
	select {
	case <-e.gate:
	case <-ctx.Done():
	}
	return nil
}
func (e *countingEngine) PoolStats() launcher.PoolStats { return launcher.PoolStats{} }

// TestReadyzCached: a flood of /readyz hits asks the engine once, however many
// arrive while that one call runs, and again only after readyTTL.
func TestReadyzCached(t *testing.T) {
	e := &countingEngine{gate: make(chan struct{})}
	h := readyHandler(e)
	var clockMu sync.Mutex
	clock := time.Now()
	if rc, ok := any(h).(*readyCache); ok { // the clock is the cache's, when there is one
		rc.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	}
	hit := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	flood := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code := hit(); code != 200 {
					t.Errorf("/readyz: HTTP %d, want 200", code)
				}
			}()
		}
		time.Sleep(100 * time.Millisecond) // let them pile up on the slow check
		close(e.gate)
		wg.Wait()
	}
	flood(100)
	if got := e.calls.Load(); got != 1 {
		t.Errorf("100 concurrent hits on a slow engine: %d engine calls, want 1", got)
	}
	for range 100 {
		hit()
	}
	if got := e.calls.Load(); got != 1 {
		t.Errorf("100 more hits within %s: %d engine calls in all, want 1", readyTTL, got)
	}
	clockMu.Lock()
	clock = clock.Add(readyTTL)
	clockMu.Unlock()
	for range 100 {
		hit()
	}
	if got := e.calls.Load(); got != 2 {
		t.Errorf("100 hits after %s: %d engine calls in all, want 2", readyTTL, got)
	}
}

// TestReadyzAndMetricsBehindTheDoor: on the MCP listener, /readyz tells a request
// without the MCP endpoint's credential only its status and a fixed word (nothing of
// the upstreams or why it is not ready) and /metrics refuses it; with the credential
// both say what they know. The metrics listener's /readyz says the fixed word to all.
func TestReadyzAndMetricsBehindTheDoor(t *testing.T) {
	ucfg, err := upstream.Parse([]byte(`{"mcpServers": {"gh": {"url": "http://127.0.0.1:1/mcp", "tools": ["t"]}}}`), upstream.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	old := upstreams
	upstreams = upstream.New(ucfg, "test", zerolog.Nop())
	t.Cleanup(func() { upstreams = old })

	const token = "door-token-5b1e"
	guard, err := httpauth.New(t.Context(), httpauth.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Transport = "http"
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	ready := &readyCache{now: time.Now}
	mux, _, err := httpMux(cfg, srv, guard, newHTTPLimits(cfg), newMetrics(), ready)
	if err != nil {
		t.Fatal(err)
	}
	metricsMux := http.NewServeMux()
	addHealth(metricsMux, ready, nil)

	get := func(h http.Handler, path string, hdr ...string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	for _, state := range []struct{ reason, public string }{{"", "ready"}, {"engine unreachable", "not ready"}} {
		ready.check = func(context.Context) string { return state.reason }
		ready.at = time.Time{}
		want := 200
		if state.reason != "" {
			want = 503
		}
		for _, tc := range []struct {
			name string
			h    http.Handler
			hdr  []string
		}{
			{"no credential", mux, nil},
			{"wrong token", mux, []string{"Authorization", "Bearer nope"}},
			{"metrics listener", metricsMux, nil},
			{"metrics listener, token", metricsMux, []string{"Authorization", "Bearer " + token}},
		} {
			if code, body := get(tc.h, "/readyz", tc.hdr...); code != want || body != state.public {
				t.Errorf("%s, %q: /readyz %d %q, want %d %q", tc.name, state.reason, code, body, want, state.public)
			}
		}
		code, body := get(mux, "/readyz", "X-MCP-AUTH", token)
		if code != want || (state.reason == "" && !strings.Contains(body, "upstream gh: unavailable")) ||
			(state.reason != "" && body != "not ready: "+state.reason) {
			t.Errorf("authenticated, %q: /readyz %d %q, want %d with the details", state.reason, code, body, want)
		}
	}
	if code, body := get(mux, "/metrics"); code != http.StatusUnauthorized || strings.Contains(body, "mcp_exec_") {
		t.Errorf("/metrics without the token: %d %.80q, want 401", code, body)
	}
	if code, body := get(mux, "/metrics", "Authorization", "Bearer "+token); code != 200 || !strings.Contains(body, "mcp_exec_executions_total") {
		t.Errorf("/metrics with the token: %d %.80q, want 200 and the series", code, body)
	}
	if code, _ := get(mux, "/healthz"); code != 200 {
		t.Errorf("/healthz: %d, want 200 without a credential", code)
	}
}
