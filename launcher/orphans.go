package launcher

import (
	"context"
	"sync"
	"time"
)

// Orphans. The launcher tracks every sandbox from the create's answer until its
// removal is confirmed. A sandbox of its instance that the engine holds but the
// launcher does not track is an orphan: the engine made it but its answer was lost
// (the engine restarted, the connection broke, the client gave up on a slow create).
// Nothing else would remove it before the next start's Reap, so a sweep lists the
// instance's sandboxes every orphanEvery while the launcher runs and removes those it
// does not track once it has seen them for orphanGrace, which is longer than a
// backend's create may take (Docker's gives up after 30 s), so that a create still in
// flight is never touched;
// Close sweeps once more and removes whatever is left. With Options.Owner, "the
// instance's" means those labelled with this server's owner, and each sweep also
// removes what servers proven gone left (owners.go); a peer sharing the instance name
// loses nothing.
type orphans struct {
	mu      sync.Mutex
	tracked map[string]struct{}
	seen    map[string]time.Time // untracked sandboxes listed, and when first
	once    sync.Once
	every   time.Duration
	grace   time.Duration
}

const (
	orphanEvery = 10 * time.Second
	orphanGrace = 60 * time.Second
)

func newOrphans() *orphans {
	return &orphans{
		tracked: map[string]struct{}{},
		seen:    map[string]time.Time{},
		every:   orphanEvery,
		grace:   orphanGrace,
	}
}

// watchOrphans starts the sweep, once, before the launcher's first create.
func (l *Launcher) watchOrphans() {
	l.orph.once.Do(func() {
		if l.closing.Err() != nil {
			return
		}
		l.cleanup.Add(1)
		go l.orphanLoop()
	})
}

func (l *Launcher) track(id string) {
	l.orph.mu.Lock()
	l.orph.tracked[id] = struct{}{}
	l.orph.mu.Unlock()
}

func (l *Launcher) untrack(id string) {
	l.orph.mu.Lock()
	delete(l.orph.tracked, id)
	l.orph.mu.Unlock()
}

func (l *Launcher) orphanLoop() {
	defer l.cleanup.Done()
	t := time.NewTicker(l.orph.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.sweepOrphans(l.closing, false)
		case <-l.closing.Done():
			return // Close sweeps once more when the runs are over
		}
	}
}

// sweepOrphans removes the untracked sandboxes seen for orphanGrace or longer; when
// final (the launcher has closed and nothing is in flight), every sandbox of the
// instance. It is bounded in time so that an absent engine does not hold Close.
func (l *Launcher) sweepOrphans(parent context.Context, final bool) {
	ctx, cancel := context.WithTimeout(parent, 10*time.Second)
	defer cancel()
	ids, others, err := l.census(ctx, false)
	if err != nil {
		l.log.Debug().Err(err).Msg("listing sandboxes for the orphan sweep")
		return
	}
	if !final {
		_, errs := l.removeLeftovers(ctx, others)
		for _, err := range errs {
			l.log.Warn().Err(err).Msg("removing a sandbox another server left")
		}
	}
	now := time.Now()
	var doomed []string
	pending := map[string]bool{}
	l.orph.mu.Lock()
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
		_, known := l.orph.tracked[id]
		if known && !final {
			continue
		}
		pending[id] = known
		first, ok := l.orph.seen[id]
		if !ok {
			first = now
			l.orph.seen[id] = now
		}
		if final || now.Sub(first) >= l.orph.grace {
			doomed = append(doomed, id)
		}
	}
	for id := range l.orph.seen {
		if _, known := l.orph.tracked[id]; known || !listed[id] {
			delete(l.orph.seen, id)
		}
	}
	l.orph.mu.Unlock()
	for _, id := range doomed {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := l.remove(rctx, id)
		cancel()
		if err != nil {
			l.log.Warn().Err(err).Str("container_id", shortID(id)).Msg("removing an untracked sandbox")
			continue
		}
		if pending[id] {
			l.log.Info().Str("container_id", shortID(id)).Msg("sandbox removed as the launcher closed")
			continue
		}
		l.log.Warn().Str("container_id", shortID(id)).Bool("closing", final).
			Msg("removed a sandbox this server did not track (the engine made it but its answer was lost)")
	}
}

// listSandboxes lists the ids of this launcher's sandboxes, running or not: its
// owner's, or without one, the instance's.
func (l *Launcher) listSandboxes(ctx context.Context) ([]string, error) {
	own, _, err := l.census(ctx, false)
	return own, err
}
