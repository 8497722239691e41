package launcher

import (
	"context"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
)

// TestRefillHold: a refill waits for the running jobs while an idle sandbox is left
// for the next one, at most refillHold; otherwise it starts at once.
func TestRefillHold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newPool(&Launcher{closing: ctx}, 2)
	t0 := time.Now()
	check := func(name string, now time.Time, wantNeed bool, wantWait time.Duration) {
		t.Helper()
		need, wait := p.needed(now)
		if need != wantNeed || wait != wantWait {
			t.Errorf("%s: needed = %v, %v; want %v, %v", name, need, wait, wantNeed, wantWait)
		}
	}

	check("empty pool, nothing running", t0, true, 0)
	p.idle = []*sandbox{{}, {}}
	check("full pool", t0, false, 0)

	p.idle = p.idle[:1]
	done := p.busy()
	check("one taken and running", t0, false, refillHold)
	check("still running", t0.Add(300*time.Millisecond), false, refillHold-300*time.Millisecond)
	check("held long enough", t0.Add(refillHold), true, 0)
	check("a new hold starts afresh", t0.Add(refillHold+time.Millisecond), false, refillHold)
	done()
	done() // idempotent
	check("job ended", t0.Add(refillHold+2*time.Millisecond), true, 0)

	done = p.busy()
	p.idle = nil
	check("empty pool while a job runs", t0, true, 0)
	p.starting = 2
	check("both starting", t0, false, 0)
	p.starting = 0
	cancel()
	check("closing", t0, false, 0)
	done()
	if p.active != 0 {
		t.Errorf("active = %d after every job ended", p.active)
	}
}

// countingCreates counts the sandboxes a launcher creates, each made delay slower.
type countingCreates struct {
	Backend
	delay time.Duration
	n     atomic.Int64
}

func (c *countingCreates) Create(ctx context.Context, spec backend.Spec) (string, error) {
	c.n.Add(1)
	time.Sleep(c.delay)
	return c.Backend.Create(ctx, spec)
}

// TestPoolClaimsRefill: a call that finds the pool empty while its refill is under way waits
// for that sandbox rather than start one more beside it (which would slow both and, the pool
// full again, be removed unused). Three calls back to back on a pool of one: the first takes
// the idle sandbox, each next one the refill the previous call set off; three sandboxes made,
// the last one idle. Each sandbox takes 1 s more to make and each call 0.2 s, so that every
// call after the first finds its refill under way, 0.2 s ahead of a cold start of its own:
// with a cold start per call that finds the pool empty, the refill wins, the call takes it,
// the next refill begins, and the cold sandbox, finding the pool full, is removed unused
// (five made).
func TestPoolClaimsRefill(t *testing.T) {
	cli := enginetest.Client(t)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	be := &countingCreates{Backend: testBackend(t, cli, log), delay: time.Second}
	instance := "test-pool-claims-refill"
	l, err := New(be, Options{Image: os.Getenv("MCP_EXEC_IMAGE"), Instance: instance, PoolSize: 1, MaxConcurrent: 2, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckAndReap(t, l)
	enginetest.StartPool(t, l, func(context.Context) { assertNoContainers(t, cli, instance) })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	full := func() {
		t.Helper()
		for i := 0; i < 1200 && l.PoolStats().Idle < 1; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if st := l.PoolStats(); st.Idle != 1 {
			t.Fatalf("pool not full after 60 s: %+v", st)
		}
	}
	full()
	before := be.n.Load()
	for i := range 3 {
		res, err := l.Run(ctx, Job{Code: "import time; time.sleep(0.2); print(1)"})
		if err != nil || res.Stdout != "1\n" || res.ExitCode != 0 {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
	}
	full()
	t.Logf("sandboxes made for 3 calls: %d (before the calls: %d)", be.n.Load()-before, before)
	if made := be.n.Load() - before; made != 3 {
		t.Errorf("3 calls back to back on a pool of one made %d sandboxes, want 3 (each call after the first waits for the refill under way)", made)
	}
}

// hangingStarts is an engine that hangs on every start until the start's context ends
// (or the test releases it).
type hangingStarts struct {
	Backend
	entered chan struct{} // a start began
	release chan struct{} // closed: starts go on
}

func (h *hangingStarts) Start(ctx context.Context, id string, stdout, stderr io.Writer) (backend.Conn, error) {
	select {
	case h.entered <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-h.release:
		return h.Backend.Start(ctx, id, stdout, stderr)
	}
}

// TestCloseEndsAColdStart: a call's cold start (the pool is empty) on an engine that
// hangs on the start ends when Close's grace period is over, and its container is
// removed: Close returns, and nothing of the instance is left. Before, the cold start
// ran on a context that nothing cancelled, Close waited for it as long as the engine
// hung, and a server stopped in that state was killed (the test harness waits 45 s
// after SIGTERM) with its containers left behind.
func TestCloseEndsAColdStart(t *testing.T) {
	cli := enginetest.Client(t)
	log := zerolog.New(zerolog.NewTestWriter(t))
	be := &hangingStarts{Backend: testBackend(t, cli, log), entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(be.release)
	instance := "test-close-ends-cold-start"
	// A pool that is never started: every call finds it empty and starts cold.
	l, err := New(be, Options{Image: os.Getenv("MCP_EXEC_IMAGE"), Instance: instance, PoolSize: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckAndReap(t, l)
	ran := make(chan error, 1)
	go func() {
		_, err := l.Run(context.Background(), Job{Code: "print(1)"})
		ran <- err
	}()
	select {
	case <-be.entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the call's sandbox never reached its start")
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second) // the grace period
		defer cancel()
		closed <- l.Close(ctx)
	}()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("Close still waiting 45 s after its grace period for a cold start the engine hangs on")
	}
	if err := <-ran; err == nil {
		t.Error("the call whose start hung succeeded, want an error")
	}
	assertNoContainers(t, cli, instance)
}
