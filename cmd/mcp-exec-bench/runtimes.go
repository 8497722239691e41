package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// rtRow is one OCI runtime's costs in the runtimes section.
type rtRow struct {
	runtime    string
	cold, warm []time.Duration // print(1), MCP round trip
	warmInside []time.Duration // the tool's duration_ms of the warm calls
	idleMem    []float64       // MiB per idle pool sandbox, from the engine's stats
	rate       float64         // warm execs/s at concurrency 1
	err        error
}

// runtimes compares the engine's default runtime with -compare-runtime in one loop,
// so that both see the same load: each iteration makes one cold call and one warm
// call (pool refilled first) under each runtime in turn. The idle memory of a warm
// sandbox is read with only that runtime's pool up, and the warm throughput windows
// alternate (two of -duration each per runtime).
func (b *bench) runtimes(ctx context.Context) error {
	if b.cfg.compare == "" {
		return nil
	}
	rows := []*rtRow{{runtime: ""}, {runtime: b.cfg.compare}}
	b.rep.rt = rows
	for _, r := range rows {
		progress("runtimes: idle memory under %s", rtName(r.runtime))
		st, err := newStack(ctx, b.cli, b.cfg.image, r.runtime, launcher.Options{PoolSize: b.cfg.pool})
		if err != nil {
			return err
		}
		err = st.waitFull(ctx)
		if err == nil {
			time.Sleep(2 * time.Second) // let the last one settle
			r.idleMem, _, err = idleUsage(ctx, b.cli)
		}
		if cerr := st.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}

	type pair struct{ cold, warm *stack }
	stacks := make([]pair, len(rows))
	defer func() {
		for _, p := range stacks {
			for _, s := range []*stack{p.cold, p.warm} {
				if s != nil {
					_ = s.close()
				}
			}
		}
	}()
	for i, r := range rows {
		var err error
		if stacks[i].cold, err = newStack(ctx, b.cli, b.cfg.image, r.runtime, launcher.Options{}); err != nil {
			return err
		}
		if stacks[i].warm, err = newStack(ctx, b.cli, b.cfg.image, r.runtime, launcher.Options{PoolSize: b.cfg.pool}); err != nil {
			return err
		}
	}
	sn := snippets[0]
	progress("runtimes: cold and warm print(1), %s and %s interleaved, %d+%d iterations", rtName(""), b.cfg.compare, b.cfg.warmup, b.cfg.n)
	for it := range b.cfg.warmup + b.cfg.n {
		for i, r := range rows {
			t0 := time.Now()
			if _, err := stacks[i].cold.call(ctx, sn); err != nil {
				r.err = fmt.Errorf("cold: %w", err)
				return r.err
			}
			d := time.Since(t0)
			if err := stacks[i].warm.waitFull(ctx); err != nil {
				return err
			}
			t0 = time.Now()
			inside, err := stacks[i].warm.call(ctx, sn)
			if err != nil {
				r.err = fmt.Errorf("warm: %w", err)
				return r.err
			}
			if it >= b.cfg.warmup {
				r.cold = append(r.cold, d)
				r.warm = append(r.warm, time.Since(t0))
				r.warmInside = append(r.warmInside, inside)
			}
		}
	}
	execs := make([]int, len(rows))
	secs := make([]float64, len(rows))
	for range 2 {
		for i, r := range rows {
			t := b.sustain(ctx, "warm, "+rtName(r.runtime), 1, func(ctx context.Context) error {
				_, err := stacks[i].warm.call(ctx, sn)
				return err
			}, nil)
			if t.firstErr != nil {
				return t.firstErr
			}
			execs[i] += t.execs
			secs[i] += b.cfg.duration.Seconds()
		}
	}
	for i, r := range rows {
		r.rate = float64(execs[i]) / secs[i]
	}
	return ctx.Err()
}

func rtName(rt string) string {
	if rt == "" {
		return "the engine's default runtime"
	}
	return rt
}

func (r *report) printRuntimes(p func(string, ...any)) {
	if len(r.rt) != 2 {
		return
	}
	base, other := r.rt[0], r.rt[1]
	table(p, fmt.Sprintf("OCI runtimes compared (`-compare-runtime %s`)", other.runtime), "`print(1)` through MCP, concurrency 1; each iteration calls both runtimes in turn, so that both see the same load. *idle memory* is the engine's figure for one idle pool sandbox (for gVisor: its Sentry, Gofer and guest memory). Throughput: warm pool, one caller, two alternating windows per runtime.", "runtime", "cold p50", "cold p90", "warm p50", "warm p90", "warm in sandbox p50", "idle memory / sandbox", "warm execs/s")
	for _, row := range r.rt {
		if row.err != nil {
			p("| %s | %s | | | | | | |", rtName(row.runtime), row.err)
			continue
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %.2f |", rtName(row.runtime),
			ms(percentile(row.cold, 0.5)), ms(percentile(row.cold, 0.9)),
			ms(percentile(row.warm, 0.5)), ms(percentile(row.warm, 0.9)),
			ms(percentile(row.warmInside, 0.5)), mib(row.idleMem), row.rate)
	}
	if base.err == nil && other.err == nil {
		p("| **%s vs %s** | %s | | %s | | %s | %s | %s |", other.runtime, rtName(""),
			durRatio(percentile(other.cold, 0.5), percentile(base.cold, 0.5)),
			durRatio(percentile(other.warm, 0.5), percentile(base.warm, 0.5)),
			durRatio(percentile(other.warmInside, 0.5), percentile(base.warmInside, 0.5)),
			ratio(median(other.idleMem), median(base.idleMem)), ratio(other.rate, base.rate))
		p("")
		p("Warm exec under %s: %s the default runtime's p50 (target: within 2x).", other.runtime, durRatio(percentile(other.warm, 0.5), percentile(base.warm, 0.5)))
	}
	p("")
}

func mib(v []float64) string {
	if len(v) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", median(v))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
