package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// tput is one sustained throughput run.
type tput struct {
	mode           string
	c              int
	rate           float64
	execs, errs    int
	p50            time.Duration
	busy           string
	createsPerExec float64
	firstErr       error
	phases         map[string][]time.Duration // churn only
}

// sustain runs c workers calling once back to back for ramp+window, and counts the
// calls that completed inside the window.
func (b *bench) sustain(ctx context.Context, mode string, c int, once func(context.Context) error, creates func() int64) tput {
	progress("throughput: %s, concurrency %d, %s", mode, c, b.cfg.duration)
	r := tput{mode: mode, c: c}
	start := time.Now()
	winStart, winEnd := start.Add(b.cfg.ramp), start.Add(b.cfg.ramp+b.cfg.duration)
	var cpu0, cpu1 cpuSample
	var cr0, cr1 int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		time.Sleep(time.Until(winStart))
		cpu0 = readCPU()
		if creates != nil {
			cr0 = creates()
		}
		time.Sleep(time.Until(winEnd))
		cpu1 = readCPU()
		if creates != nil {
			cr1 = creates()
		}
	}()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(winEnd) {
				t0 := time.Now()
				err := once(ctx)
				t1 := time.Now()
				in := !t1.Before(winStart) && !t1.After(winEnd)
				mu.Lock()
				switch {
				case err != nil && in:
					r.errs++
					if r.firstErr == nil {
						r.firstErr = err
					}
				case err == nil && in:
					r.execs++
					lat = append(lat, t1.Sub(t0))
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	<-sampled
	r.rate = float64(r.execs) / b.cfg.duration.Seconds()
	r.p50 = percentile(lat, 0.5)
	r.busy = busyPct(cpu0, cpu1)
	if creates != nil && r.execs > 0 {
		r.createsPerExec = float64(cr1-cr0) / float64(r.execs)
	}
	return r
}

// churn measures the engine's create+start+wait+remove rate for cmd at concurrency c.
func (b *bench) churn(ctx context.Context, c int, cmd []string) tput {
	var mu sync.Mutex
	phases := map[string][]time.Duration{}
	ch := b.sustain(ctx, "engine churn (`"+strings.Join(cmd, " ")+"`)", c, func(ctx context.Context) error {
		t, err := churnOnce(ctx, b.cli, b.cfg.image, b.profile, cmd)
		if err == nil {
			mu.Lock()
			phases["create"] = append(phases["create"], t.create)
			phases["start"] = append(phases["start"], t.start)
			phases["wait"] = append(phases["wait"], t.wait)
			phases["remove"] = append(phases["remove"], t.remove)
			mu.Unlock()
		}
		return err
	}, nil)
	ch.phases = phases
	return ch
}

func (b *bench) throughput(ctx context.Context) error {
	p1 := snippets[0]
	for _, c := range b.cfg.conc {
		// The engine's churn first, then each mode at the same concurrency, so that
		// the ratios compare runs made close together.
		ch := b.churn(ctx, c, []string{"true"})
		b.rep.churn = append(b.rep.churn, ch)
		if b.cfg.diag && ctx.Err() == nil {
			// Diagnostic: the same loop running an interpreter, the least a Python
			// sandbox must do (the launcher's bootstrap starts one and forks it).
			b.rep.churnPy = append(b.rep.churnPy, b.churn(ctx, c, []string{"python3", "-I", "-c", "pass"}))
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		modes := []struct {
			name    string
			pool    int
			preload []string
		}{
			{"cold", 0, nil},
			{fmt.Sprintf("warm, pool %d", b.cfg.pool), b.cfg.pool, nil},
			{fmt.Sprintf("warm, pool %d, Preload numpy,pandas", b.cfg.pool), b.cfg.pool, []string{"numpy", "pandas"}},
		}
		for _, m := range modes {
			st, err := newStack(ctx, b.cli, b.cfg.image, b.cfg.runtime, launcher.Options{
				PoolSize: m.pool, Preload: m.preload, MaxConcurrent: c, MaxQueue: 64,
			})
			if err != nil {
				return err
			}
			if m.pool > 0 {
				if err := st.waitFull(ctx); err != nil {
					st.close()
					return err
				}
			}
			r := b.sustain(ctx, m.name, c, func(ctx context.Context) error {
				_, err := st.call(ctx, p1)
				return err
			}, st.eng.creates.Load)
			b.rep.tput = append(b.rep.tput, r)
			if err := st.close(); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}
