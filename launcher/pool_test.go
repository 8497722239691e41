package launcher

import (
	"context"
	"testing"
	"time"
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
