package launcher

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
)

// failingRemove is the engine with ContainerRemove failing while fail is set, as an
// engine that stays away longer than a removal's own retries would look.
type failingRemove struct {
	*client.Client
	fail  atomic.Bool
	tried atomic.Int32
}

func (f *failingRemove) ContainerRemove(ctx context.Context, id string, o client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	if f.fail.Load() {
		f.tried.Add(1)
		return client.ContainerRemoveResult{}, errors.New("injected: engine away")
	}
	return f.Client.ContainerRemove(ctx, id, o)
}

// TestFailedRemovalRetried: a sandbox whose removal failed is removed by the janitor
// once the engine answers again, without a restart of the server.
func TestFailedRemovalRetried(t *testing.T) {
	cli := enginetest.Client(t)
	eng := &failingRemove{Client: cli}
	instance := "test-janitor"
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	l, err := New(testBackend(t, eng, log), Options{Image: os.Getenv("MCP_EXEC_IMAGE"), Instance: instance, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l.janitorEvery = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		t.Fatalf("engine check: %v", err)
	}
	if _, err := l.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		f := make(client.Filters).Add("label", LabelInstance+"="+instance)
		list, err := listContainers(ctx, cli, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}

	eng.fail.Store(true)
	res, err := l.Run(ctx, Job{Code: "print('x')"})
	if err != nil || res.Stdout != "x\n" {
		t.Fatalf("Run: %v %+v", err, res)
	}
	for deadline := time.Now().Add(10 * time.Second); eng.tried.Load() < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("removal tried %d times in 10 s, want the janitor to keep trying", eng.tried.Load())
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("%d containers while removal fails, want the 1 the call used", n)
	}

	eng.fail.Store(false)
	pending := func() int {
		l.pendMu.Lock()
		defer l.pendMu.Unlock()
		return len(l.pending)
	}
	// The engine may list the container as gone a moment before its remove call
	// returns to the janitor (Podman does), so both are awaited, each to the end.
	for deadline := time.Now().Add(10 * time.Second); count() != 0 || pending() != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the engine came back: %d containers, %d removals still pending; want 0 and 0", count(), pending())
		}
	}

	// Closing while the engine is still away does not wait for it beyond the
	// janitor's last, short attempt.
	eng.fail.Store(true)
	if _, err := l.Run(ctx, Job{Code: "print('y')"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		l.pendMu.Lock()
		n := len(l.pending)
		l.pendMu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second failed removal never reached the janitor")
		}
	}
	start := time.Now()
	if err := l.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Close took %s with the engine away, want it bounded by the janitor's last attempt", d)
	}
	eng.fail.Store(false)
	l2, _ := New(testBackend(t, cli, zerolog.Nop()), Options{Instance: instance})
	if n, err := l2.Reap(ctx); err != nil || n != 1 {
		t.Errorf("reap after close: removed %d (%v), want the 1 left while the engine was away", n, err)
	}
	if n := count(); n != 0 {
		t.Errorf("%d containers left", n)
	}
}
