package launcher

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
)

// lostCreate is a backend with the answer to a create dropped while drop is set: the
// engine makes the sandbox, the launcher gets an error and never learns its id, as
// when the engine restarts or the connection breaks between the two.
type lostCreate struct {
	Backend
	drop    atomic.Bool
	dropped atomic.Int32
}

func (e *lostCreate) Create(ctx context.Context, spec backend.Spec) (string, error) {
	id, err := e.Backend.Create(ctx, spec)
	if err == nil && e.drop.CompareAndSwap(true, false) {
		e.dropped.Add(1)
		return "", errors.New("injected: the create's answer was lost")
	}
	return id, err
}

// TestLostCreateSwept: a container whose create answer was lost is removed while the
// launcher runs, once the grace period for creates in flight has passed and not
// before; the sandboxes the launcher does track (the warm pool's) are left alone.
func TestLostCreateSwept(t *testing.T) {
	cli := enginetest.Client(t)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	eng := &lostCreate{Backend: testBackend(t, cli, log)}
	instance := "test-lost-create"
	l, err := New(eng, Options{Image: os.Getenv("MCP_EXEC_IMAGE"), Instance: instance, PoolSize: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	const grace = 3 * time.Second
	l.orph.every, l.orph.grace = 100*time.Millisecond, grace
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		engineSkipOrFail(t, "engine check: %v", err)
	}
	if _, err := l.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		assertNoContainers(t, cli, instance)
	})
	ids := func() map[string]bool {
		t.Helper()
		list, err := l.listSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, id := range list {
			m[id] = true
		}
		return m
	}
	l.StartPool()
	for deadline := time.Now().Add(time.Minute); l.PoolStats().Idle < 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool never filled: %+v", l.PoolStats())
		}
	}
	before := ids()
	if len(before) != 1 {
		t.Fatalf("%d sandboxes with a full pool of 1, want 1", len(before))
	}

	// The pool's sandbox serves this call; the refill's create loses its answer.
	eng.drop.Store(true)
	lost := time.Now()
	if res, err := l.Run(ctx, Job{Code: "print('ok')"}); err != nil || res.Stdout != "ok\n" {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	var orphan string
	for deadline := time.Now().Add(30 * time.Second); orphan == ""; time.Sleep(50 * time.Millisecond) {
		if eng.dropped.Load() == 1 {
			l.orph.mu.Lock()
			for id := range ids() {
				if _, ok := l.orph.tracked[id]; !ok {
					orphan = id
				}
			}
			l.orph.mu.Unlock()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no untracked sandbox after the lost create (dropped %d)", eng.dropped.Load())
		}
	}
	t.Logf("orphan %s, lost %s ago", shortID(orphan), time.Since(lost).Round(time.Millisecond))
	// Within the grace period it stays: it could be a create still in flight.
	if time.Since(lost) < grace-time.Second {
		time.Sleep(grace - time.Second - time.Since(lost))
		if !ids()[orphan] {
			t.Fatalf("the untracked sandbox was removed within the grace period of %s", grace)
		}
	}
	for deadline := time.Now().Add(grace + 15*time.Second); ids()[orphan]; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the untracked sandbox %s is still there %s after its create, with a grace of %s",
				shortID(orphan), time.Since(lost).Round(time.Second), grace)
		}
	}
	t.Logf("orphan removed %s after its create", time.Since(lost).Round(time.Millisecond))

	// The pool's tracked sandboxes survived the sweeps and still serve calls.
	for deadline := time.Now().Add(time.Minute); l.PoolStats().Idle < 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool never refilled: %+v", l.PoolStats())
		}
	}
	time.Sleep(grace + 500*time.Millisecond)
	if l.PoolStats().Idle != 1 || len(ids()) != 1 {
		t.Fatalf("after a grace period: pool %+v, %d sandboxes; want the tracked one kept", l.PoolStats(), len(ids()))
	}
	if res, err := l.Run(ctx, Job{Code: "print('still')"}); err != nil || res.Stdout != "still\n" {
		t.Fatalf("Run after the sweeps: %+v, %v", res, err)
	}
}

// TestCloseSweepsLostCreate: a create whose answer was lost just before Close leaves
// nothing behind once Close returns, grace period or not.
func TestCloseSweepsLostCreate(t *testing.T) {
	cli := enginetest.Client(t)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	eng := &lostCreate{Backend: testBackend(t, cli, log)}
	instance := "test-lost-create-close"
	l, err := New(eng, Options{Image: os.Getenv("MCP_EXEC_IMAGE"), Instance: instance, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		engineSkipOrFail(t, "engine check: %v", err)
	}
	if _, err := l.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	eng.drop.Store(true)
	if _, err := l.Run(ctx, Job{Code: "print(1)"}); err == nil {
		t.Fatal("Run succeeded with its create's answer lost")
	}
	if ids, _ := l.listSandboxes(ctx); len(ids) != 1 {
		t.Fatalf("%d sandboxes after the lost create, want 1 (the engine made it)", len(ids))
	}
	if err := l.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	assertNoContainers(t, cli, instance)
}

// engineSkipOrFail skips outside CI and fails in CI, where a skipped test proves nothing.
func engineSkipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "" {
		t.Skipf(format, args...)
	}
	t.Fatalf(format, args...)
}
