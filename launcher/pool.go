package launcher

import (
	"context"
	"errors"
	"sync"
	"time"
)

// pool keeps sandboxes started ahead of demand: created, attached, started, the
// interpreter loaded (and Options.Preload imported) and blocked reading its code. Each
// serves exactly one job and is then removed like a cold one; the pool refills in the
// background. An idle sandbox holds no caller data: none has been sent to it yet.
type pool struct {
	l    *Launcher
	size int
	// spawn prepares one sandbox: l.start for the warm pool, a session sandbox for
	// the session pool (sessionpool.go).
	spawn func(ctx context.Context) (*sandbox, error)
	// maxAge, when not zero, is how long an idle sandbox may wait: an older one is
	// removed and replaced (the session pool's sandboxes carry an expiry from their
	// creation).
	maxAge time.Duration
	name   string // "warm pool" or "session pool", for the logs

	mu       sync.Mutex
	idle     []*sandbox
	starting int           // sandboxes being prepared
	claims   int           // callers of get waiting for one of those rather than a cold start
	changed  chan struct{} // closed (and replaced) when idle grows or a start ends
	wake     chan struct{} // signalled when the refill loop should look again
	imageID  string        // image the idle sandboxes were made from
	lastErr  error         // the last refill failure, for readiness reports
	once     sync.Once     // starts the refill loop, or marks it never started
	active   int           // jobs running in a sandbox (warm or cold)
	held     time.Time     // when a needed refill was first held back; zero if none is
	done     chan struct{} // closed when the refill loop has ended
}

func newPool(l *Launcher, size int) *pool {
	p := &pool{
		l:       l,
		size:    size,
		spawn:   l.startPooled,
		name:    "warm pool",
		changed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	return p
}

// start begins filling the pool.
func (p *pool) start() { p.once.Do(func() { go p.refill() }) }

// stopped waits for the refill loop to end; a loop never started counts as ended.
func (p *pool) stopped() <-chan struct{} {
	p.once.Do(func() { close(p.done) })
	return p.done
}

// get returns a ready sandbox: an idle one at once, or else whichever comes first of
// a pooled one becoming ready and a cold start of our own. A cold start that loses the
// race joins the pool, so no engine work is wasted.
//
// A caller that finds the pool empty while a refill is already under way that no other
// caller counts on claims that one instead of starting a cold sandbox of its own: it is
// further along than a new start would be, and one more start beside it would only slow
// both and, once the pool is full again, be removed unused. The claim lapses when a start
// fails (the caller then starts its own).
func (p *pool) get(ctx context.Context) (*sandbox, bool, error) {
	var cold chan started // our own cold start, once made
	claimed := false
	defer func() {
		if claimed {
			p.mu.Lock()
			p.claims--
			p.mu.Unlock()
		}
	}()
	for {
		if sb := p.take(); sb != nil {
			if cold != nil {
				p.adoptLater(cold)
			}
			return sb, true, nil
		}
		p.mu.Lock()
		changed := p.changed
		switch {
		case cold == nil && !claimed && p.starting > p.claims:
			p.claims++
			claimed = true
		case claimed && p.starting < p.claims:
			p.claims-- // a start counted on failed
			claimed = false
		}
		startCold := cold == nil && !claimed
		p.mu.Unlock()
		if startCold {
			ch := make(chan started, 1)
			go func() {
				// Not the caller's: a caller that leaves does not waste the start (the
				// pool adopts it). But the launcher's stop ends it: Close waits for it
				// (adoptLater), and an engine that hangs on a start must not hold Close
				// past its grace, until the server is killed with its sandboxes.
				sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
				defer cancel()
				defer context.AfterFunc(p.l.stop, cancel)()
				sb, err := p.spawn(sctx)
				ch <- started{sb, err}
			}()
			cold = ch
		}
		select {
		case <-changed:
		case c := <-cold: // never, while cold is nil
			return c.sb, false, c.err
		case <-ctx.Done():
			if cold != nil {
				p.adoptLater(cold)
			}
			return nil, false, ctx.Err()
		}
	}
}

type started struct {
	sb  *sandbox
	err error
}

// adoptLater gives the pool the cold start that lost the race. It is called within a
// Run, whose count it extends so that Close waits for it.
func (p *pool) adoptLater(cold <-chan started) {
	p.l.runs.Add(1)
	go func() {
		defer p.l.runs.Done()
		if c := <-cold; c.err == nil {
			p.adopt(c.sb, false)
		}
	}()
}

// take removes and returns a live idle sandbox, disposing of dead ones, or nil.
func (p *pool) take() *sandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.signal(p.wake)
	for len(p.idle) > 0 {
		sb := p.idle[0]
		p.idle = p.idle[1:]
		if sb.alive() && !p.aged(sb, time.Now()) {
			p.logIdle("sandbox taken from the " + p.name)
			return sb
		}
		p.l.dispose(sb)
	}
	return nil
}

// aged reports whether idle sb has waited longer than maxAge.
func (p *pool) aged(sb *sandbox, now time.Time) bool {
	return p.maxAge > 0 && now.Sub(sb.born) > p.maxAge
}

// recycle removes the idle sandboxes older than maxAge, and returns how long until
// the next one is (0: none is idle, or no maxAge).
func (p *pool) recycle() time.Duration {
	if p.maxAge <= 0 {
		return 0
	}
	now := time.Now()
	p.mu.Lock()
	var old []*sandbox
	keep := p.idle[:0]
	next := time.Duration(0)
	for _, sb := range p.idle {
		if p.aged(sb, now) {
			old = append(old, sb)
			continue
		}
		keep = append(keep, sb)
		if d := sb.born.Add(p.maxAge).Sub(now) + time.Millisecond; next == 0 || d < next {
			next = d
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	p.mu.Unlock()
	for _, sb := range old {
		p.l.dispose(sb)
	}
	if len(old) > 0 {
		p.l.log.Debug().Int("recycled", len(old)).Dur("max_age", p.maxAge).Msg("idle sandboxes of the " + p.name + " replaced for their age")
	}
	return next
}

// adopt adds a started sandbox to the pool once its interpreter is ready, or removes
// it when the pool is full, closed, or the sandbox dies first. refilled: sb is the
// refill's own start, counted in starting until it joins the pool (in the same step, so
// that a caller counting on it never sees it neither starting nor idle).
func (p *pool) adopt(sb *sandbox, refilled bool) {
	select {
	case <-sb.dec.ready:
	case <-sb.streamDone:
	case <-p.l.closing.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.broadcast()
	if refilled {
		p.starting--
	}
	if !sb.alive() || p.l.closing.Err() != nil || len(p.idle)+p.starting >= p.size {
		p.l.dispose(sb)
		return
	}
	p.idle = append(p.idle, sb)
	p.logIdle("sandbox ready in the " + p.name)
}

// logIdle logs the pool's state at debug level (for benchmarks that wait for a full
// pool from outside); p.mu is held.
func (p *pool) logIdle(msg string) {
	p.l.log.Debug().Int("pool_idle", len(p.idle)).Int("pool_starting", p.starting).Int("pool_size", p.size).Msg(msg)
}

// broadcast wakes every caller waiting in get; p.mu is held.
func (p *pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *pool) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// refill keeps idle+starting at size, retrying as soon as the engine answers a ping
// while it is away and with backoff while it fails otherwise,
// and drains the pool when the image changes under the same name.
func (p *pool) refill() {
	defer close(p.done)
	p.checkImage()
	check := time.NewTicker(imageCheckInterval)
	defer check.Stop()
	var backoff time.Duration
	var retry <-chan time.Time // non-nil while backing off
	away := false              // the last refill found the engine away
	for {
		var age <-chan time.Time // non-nil while an idle sandbox will grow too old
		if d := p.recycle(); d > 0 {
			age = time.After(d)
		}
		need, wait := false, time.Duration(0)
		if retry == nil {
			need, wait = p.needed(time.Now())
		}
		var hold <-chan time.Time // non-nil while a refill waits for the running jobs
		if wait > 0 {
			hold = time.After(wait)
		}
		if need {
			switch err := p.startOne(); {
			case err == nil:
				backoff, away = 0, false
			case errors.Is(err, ErrEngineUnavailable):
				// The engine is away (restarting): refill as soon as it answers a
				// ping again, rather than after a backoff.
				if !away && p.l.closing.Err() == nil {
					p.l.log.Warn().Err(err).Msg("refilling " + p.name + ": engine away; refilling when it answers")
				}
				away = true
				retry = time.After(engineWaitPoll)
			default:
				backoff = nextBackoff(backoff)
				retry = time.After(backoff)
				if p.l.closing.Err() == nil {
					p.l.log.Warn().Err(err).Dur("retry_in", backoff).Msg("refilling " + p.name)
				}
			}
			continue
		}
		select {
		case <-p.l.closing.Done():
			p.drain()
			return
		case <-p.wake:
		case <-retry:
			retry = nil
			if away && !p.engineAnswers() {
				retry = time.After(engineWaitPoll)
			}
		case <-hold:
		case <-age:
		case <-check.C:
			p.checkImage()
		}
	}
}

// refillHold is how long a refill may wait for running jobs to end. Starting a
// container costs the engine and runc about 0.4 CPU-seconds (docs/benchmarks.md),
// which on a small machine slows the job it would run beside: while an idle sandbox is still
// there for the next job, the pool refills when the jobs in flight end, or after
// refillHold, whichever comes first. An empty pool refills at once.
const refillHold = time.Second

// needed reports whether the refill loop should start a sandbox now, and if one is
// needed but held back for the running jobs, how long it may still wait.
func (p *pool) needed(now time.Time) (bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l.closing.Err() != nil || len(p.idle)+p.starting >= p.size {
		p.held = time.Time{}
		return false, 0
	}
	if p.active == 0 || len(p.idle) == 0 {
		// Nothing runs, or nothing is left for the next job: no reason to wait.
		p.held = time.Time{}
		return true, 0
	}
	if p.held.IsZero() {
		p.held = now
	}
	if waited := now.Sub(p.held); waited < refillHold {
		return false, refillHold - waited
	}
	p.held = time.Time{}
	return true, 0
}

// busy counts a job running in a sandbox until the returned func is called.
func (p *pool) busy() (done func()) {
	p.mu.Lock()
	p.active++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.active--
			p.mu.Unlock()
			p.signal(p.wake)
		})
	}
}

// startOne prepares one sandbox and adds it to the pool once it is ready.
func (p *pool) startOne() error {
	p.mu.Lock()
	p.starting++
	p.mu.Unlock()
	sb, err := p.spawn(p.l.closing)
	if err == nil {
		err = p.waitReady(sb)
	}
	p.mu.Lock()
	p.lastErr = err
	if err != nil {
		p.starting--
		p.broadcast()
	}
	p.mu.Unlock()
	if err == nil {
		p.adopt(sb, true)
	}
	return err
}

// engineAnswers pings the engine.
func (p *pool) engineAnswers() bool {
	ctx, cancel := context.WithTimeout(p.l.closing, 2*time.Second)
	defer cancel()
	return p.l.ping(ctx) == nil
}

const imageCheckInterval = 30 * time.Second

func nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return 500 * time.Millisecond
	}
	return min(2*d, 10*time.Second)
}

// waitReady waits for the bootstrap's ready frame, so that a pooled sandbox is one
// whose interpreter (and preloaded modules) are loaded.
func (p *pool) waitReady(sb *sandbox) error {
	select {
	case <-sb.dec.ready:
		return nil
	case <-sb.streamDone:
		p.l.dispose(sb)
		return sb.brokenErr(errNoReady)
	case <-p.l.closing.Done():
		p.l.dispose(sb)
		return ErrClosed
	}
}

// checkImage drains the idle sandboxes when the image tag now names another image
// (rebuilt or re-pulled), so that every exec runs on the image currently configured.
func (p *pool) checkImage() {
	ctx, cancel := context.WithTimeout(p.l.closing, 10*time.Second)
	defer cancel()
	id, err := p.l.be.ImageID(ctx, p.l.opts.Image)
	if err != nil {
		return // the next refill reports what is wrong
	}
	p.mu.Lock()
	changed := p.imageID != "" && p.imageID != id
	p.imageID = id
	var stale []*sandbox
	if changed {
		stale, p.idle = p.idle, nil
	}
	p.mu.Unlock()
	for _, sb := range stale {
		p.l.dispose(sb)
	}
	if changed {
		p.l.log.Info().Int("drained", len(stale)).Msg("sandbox image changed; " + p.name + " refilled")
		p.signal(p.wake)
	}
}

func (p *pool) drain() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, sb := range idle {
		p.l.dispose(sb)
	}
}

// PoolStats describes the warm pool.
type PoolStats struct {
	Size    int   // configured size; 0 is cold mode
	Idle    int   // ready sandboxes waiting for a job
	LastErr error // the last refill failure, nil once a refill succeeds
}

func (p *pool) stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Size: p.size, Idle: len(p.idle), LastErr: p.lastErr}
}

var errNoReady = errors.New("sandbox ended before its interpreter was ready")
