package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
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
