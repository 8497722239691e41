package launcher

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
)

// TestSessionPoolMaxAge: a twelfth of the lifetime, from 10 s to 5 min, never more
// than half of it.
func TestSessionPoolMaxAge(t *testing.T) {
	for _, c := range []struct{ lifetime, want time.Duration }{
		{time.Hour, 5 * time.Minute},
		{7 * 24 * time.Hour, 5 * time.Minute},
		{30 * time.Minute, 150 * time.Second},
		{time.Minute, 10 * time.Second},
		{10 * time.Second, 5 * time.Second},
	} {
		if got := sessionPoolMaxAge(c.lifetime); got != c.want {
			t.Errorf("sessionPoolMaxAge(%v) = %v, want %v", c.lifetime, got, c.want)
		}
	}
}

// TestSessionPoolRecycles, against the engine: an idle pooled session sandbox older than
// the pool's maximum age is removed and replaced by a new one, so that no session is
// served one whose expiry label (its creation plus the lifetime) has come closer than
// the lifetime less that age. The age is shortened to 2 s here.
func TestSessionPoolRecycles(t *testing.T) {
	cli := enginetest.Client(t)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	instance := "test-session-pool-recycles"
	l, err := New(testBackend(t, cli, log), Options{Image: os.Getenv("MCP_EXEC_IMAGE"), Instance: instance, Logger: log,
		SessionPool: SessionPoolOptions{Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckAndReap(t, l)
	l.spool.maxAge = 2 * time.Second
	enginetest.StartPool(t, l, func(context.Context) { assertNoContainers(t, cli, instance) })
	idle := func() string {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			l.spool.mu.Lock()
			var id string
			if len(l.spool.idle) == 1 {
				id = l.spool.idle[0].id
			}
			l.spool.mu.Unlock()
			if id != "" {
				return id
			}
		}
		t.Fatalf("the session pool did not fill in 60 s: %+v", l.SessionPoolStats())
		return ""
	}
	first := idle()
	var second string
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if second = idle(); second != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle pooled sandbox %.12s was not replaced within 45 s (max age 2 s)", first)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ids, err := l.Sandboxes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, first) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the aged pooled sandbox %.12s is still there 30 s after its replacement", first)
		}
	}
}
