package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// The sessions section (g): session_create through MCP with a session pool of one
// (the sandbox waits, started in session mode) against session_create starting its
// sandbox cold, in one run, interleaved call by call so that both meet the same load.
// Before each call every earlier sandbox of both stacks is removed and the pool is
// full; each session is closed after its create, untimed.

// sessionMemory is the sessions' memory in both stacks (newStack's SessionOptions).
const sessionMemory = 512 * launcher.MiB

func (b *bench) sessions(ctx context.Context) error {
	cold, err := newStack(ctx, b.cli, b.cfg.image, b.cfg.runtime, launcher.Options{PoolSize: -1})
	if err != nil {
		return err
	}
	defer cold.close()
	pooled, err := newStack(ctx, b.cli, b.cfg.image, b.cfg.runtime, launcher.Options{PoolSize: -1,
		SessionPool: launcher.SessionPoolOptions{Size: 1, Memory: sessionMemory, Lifetime: time.Hour}})
	if err != nil {
		return err
	}
	defer pooled.close()
	rows := []*series{
		{key: "g-cold", path: "(g) session_create, cold (no session pool)", snippet: "session_create"},
		{key: "g-pool", path: "(g) session_create from the session pool (size 1, refilled before each)", snippet: "session_create"},
	}
	stacks := []*stack{cold, pooled}
	progress("latency: session_create, cold and from the session pool, interleaved")
	for i := range b.cfg.warmup + b.cfg.n {
		for j, st := range stacks {
			if err := settleSessions(ctx, pooled); err != nil {
				return err
			}
			t0 := time.Now()
			err := st.openSession(ctx)
			d := time.Since(t0)
			if err != nil {
				rows[j].err = err
				return err
			}
			st.closeSession(ctx, st.session)
			st.session = ""
			if i >= b.cfg.warmup {
				rows[j].lat = append(rows[j].lat, d)
				rows[j].calls++
			}
		}
	}
	if st := pooled.l.SessionPoolStats(); st.FromPool != int64(b.cfg.warmup+b.cfg.n) || st.Cold != 0 {
		return fmt.Errorf("the pooled stack's sessions: %d from the pool, %d cold; want all %d from the pool", st.FromPool, st.Cold, b.cfg.warmup+b.cfg.n)
	}
	if st := cold.l.SessionPoolStats(); st.FromPool != 0 {
		return errors.New("the cold stack took a session from a pool it does not have")
	}
	b.rep.sessionCreate = rows
	return ctx.Err()
}

// settleSessions waits until the bench's instance (both stacks share it) holds only
// the pooled stack's idle session sandbox: earlier sessions' removed, the pool refilled.
func settleSessions(ctx context.Context, pooled *stack) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ids, err := pooled.l.Sandboxes(ctx)
		if err != nil {
			return err
		}
		if len(ids) == 1 && pooled.l.SessionPoolStats().Idle == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandboxes not settled after 2 minutes: %d, want the pool's 1 (%+v)", len(ids), pooled.l.SessionPoolStats())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (r *report) printSessionCreate(p func(string, ...any)) {
	if len(r.sessionCreate) != 2 {
		return
	}
	table(p, "(g) session_create: from the session pool against cold",
		"The MCP `tools/call session_create` round trip until the session's interpreter is ready, two stacks in one run, called alternately; before each call the earlier sessions' sandboxes are removed and the pool is full. Session memory 512 MiB, no preload.",
		"path", "n", "p50", "p90")
	for _, s := range r.sessionCreate {
		p("| %s | %d | %s | %s |", s.path, len(s.lat), ms(percentile(s.lat, 0.5)), ms(percentile(s.lat, 0.9)))
	}
	c, w := percentile(r.sessionCreate[0].lat, 0.5), percentile(r.sessionCreate[1].lat, 0.5)
	p("")
	p("Ratio, p50 from the pool / p50 cold: **%s** (%s / %s).", durRatio(w, c), ms(w), ms(c))
	p("")
}
