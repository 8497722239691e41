package launcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// Options configure a Launcher. Zero values take the defaults named on each field.
type Options struct {
	Image          string        // sandbox image; "" is DefaultImage
	Python         string        // interpreter inside the image; "" is "python3"
	Memory         int64         // bytes, also the swap limit (no swap); 0 is 256 MiB
	Pids           int64         // process/thread limit; 0 is 128
	CPUs           float64       // CPU quota; 0 is 1
	TmpfsSize      int64         // bytes of the private /tmp (and /dev/shm); 0 is 64 MiB
	Runtime        string        // OCI runtime name; "" is the engine's default; see GVisor
	MaxOutputBytes int           // stdout+stderr cap; 0 is 1 MiB
	MaxFileBytes   int           // cap on one returned file; 0 is 8 MiB
	MaxFilesBytes  int           // cap on all returned files together; 0 is 16 MiB
	DefaultTimeout time.Duration // when Job.Timeout is 0; 0 is 30 s
	Instance       string        // label value naming this server's containers; "" is "default"
	// Owner names the server process making the sandboxes (launcher/owner): they are
	// labelled with it, and the reaper and the sweeps remove another owner's only once
	// it is proven gone (owners.go). It needs a backend that is an OwnerLister. The
	// zero value: the instance alone owns its sandboxes, and a start removes all of
	// them (for backends where an instance is one server's by construction: a
	// Kubernetes replica's is its pod's name, the process backend's runs die with it).
	Owner owner.ID
	// OwnerContainer is the engine's id of the container the server runs in, if any
	// (owner.Proc.Container): a peer that cannot judge Owner asks the engine whether
	// that container stopped or restarted since (owners.go).
	OwnerContainer string
	Preload        []string // modules the bootstrap imports before the code arrives
	// Prestart names languages besides Python (OtherLanguages) whose interpreter each
	// warm-pool sandbox starts ahead, waiting for its code (boot.py, _ahead); a call of
	// another language kills it first. Cold sandboxes know their language and start none.
	Prestart      []string
	MaxConcurrent int // sandboxes running at once; 0 is 2
	MaxQueue      int // calls waiting for a slot; beyond it Run fails with ErrBusy; 0: none may wait
	PoolSize      int // sandboxes kept started ahead of demand; 0 is cold mode
	// SessionPool keeps session sandboxes started ahead of OpenSession
	// (sessionpool.go); the zero value keeps none.
	SessionPool SessionPoolOptions
	// EngineWait is how long a call waits for an engine that went away (restarted)
	// before it fails, at most its own timeout; 0: it fails at once.
	EngineWait time.Duration
	// Egress opens the channels of jobs with Job.Egress set (egress.go); nil: such
	// jobs fail with ErrEgressUnavailable.
	Egress  EgressChannels
	Metrics Metrics // nil records nothing
	Logger  zerolog.Logger
}

// Defaults.
const (
	DefaultImage = "mcp-exec/python-sandbox:v1"
	MiB          = 1 << 20
)

func (o Options) withDefaults() Options {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Memory, 256*MiB)
	def(&o.Pids, 128)
	def(&o.TmpfsSize, 64*MiB)
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if !(o.CPUs > 0) {
		o.CPUs = 1
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = MiB
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 8 * MiB
	}
	if o.MaxFilesBytes <= 0 {
		o.MaxFilesBytes = 16 * MiB
	}
	if o.DefaultTimeout == 0 {
		o.DefaultTimeout = 30 * time.Second
	}
	if o.Instance == "" {
		o.Instance = "default"
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 2
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	o.SessionPool = o.SessionPool.withDefaults(o)
	return o
}

// Launcher runs each Job in a new container and removes it afterwards.
type Launcher struct {
	be    Backend
	opts  Options
	log   zerolog.Logger
	slots *slots
	pool  *pool // nil in cold mode
	spool *pool // the session pool; nil without one

	sessStats sessionStats

	stop     context.Context // cancelled by Close after the grace period: ends every run in flight
	cancel   context.CancelFunc
	closing  context.Context // cancelled as Close begins: the pool stops and drains
	stopPool context.CancelFunc
	mu       sync.Mutex
	closed   bool
	runs     sync.WaitGroup // Run calls in flight
	cleanup  sync.WaitGroup // container removals in flight

	// Removals that failed (the engine was away longer than cleanupTimeout) are tried
	// again by the janitor until they succeed or the launcher closes.
	orph *orphans // sandboxes the engine holds that the launcher does not track
	proc owner.Proc

	pendMu       sync.Mutex
	pending      map[string]struct{}
	janitor      sync.Once
	janitorEvery time.Duration

	egressOK atomic.Bool // CheckEgress passed: jobs with a profile may run
}

const janitorInterval = 10 * time.Second

// New returns a Launcher that runs its sandboxes through be. It does not contact the
// engine: call Check for that.
func New(be Backend, opts Options) (*Launcher, error) {
	o := opts.withDefaults()
	if _, ok := be.(OwnerLister); !ok && !o.Owner.IsZero() {
		return nil, errors.New("launcher: Options.Owner needs a backend that lists sandboxes with their owners (OwnerLister)")
	}
	stop, cancel := context.WithCancel(context.Background())
	closing, stopPool := context.WithCancel(stop)
	l := &Launcher{
		be:       be,
		opts:     o,
		log:      o.Logger,
		slots:    newSlots(o.MaxConcurrent, o.MaxQueue),
		stop:     stop,
		cancel:   cancel,
		closing:  closing,
		stopPool: stopPool,
		pending:  map[string]struct{}{},
		orph:     newOrphans(),

		janitorEvery: janitorInterval,
	}
	if o.PoolSize > 0 {
		l.pool = newPool(l, o.PoolSize)
	}
	l.spool = newSessionPool(l)
	return l, nil
}

// StartPool begins filling the warm pool and the session pool (no-op for one of size
// 0). It is separate from New so that Reap can first remove what an earlier run left:
// the pools' containers carry the same labels. Until then, Run and OpenSession start
// sandboxes cold.
func (l *Launcher) StartPool() {
	if l.pool != nil {
		l.pool.start()
	}
	if l.spool != nil {
		l.spool.start()
	}
}

// PoolStats reports the warm pool's state; Size is 0 in cold mode.
func (l *Launcher) PoolStats() PoolStats {
	if l.pool == nil {
		return PoolStats{}
	}
	return l.pool.stats()
}

// Options returns the effective options, defaults applied.
func (l *Launcher) Options() Options { return l.opts }

// Backend is the backend l runs sandboxes on.
func (l *Launcher) Backend() Backend { return l.be }

// Run runs job in a fresh sandbox and returns what the program did. The returned error
// is for infrastructure failures only (see ErrEngineUnavailable and friends) or the
// context's error when ctx ends first; in every case the container is removed.
func (l *Launcher) Run(ctx context.Context, job Job) (Result, error) {
	if err := job.checkLanguage(); err != nil {
		return Result{}, err
	}
	return l.call(ctx, job, func(ctx context.Context, job Job) (Result, error) {
		res, waited, err := l.runWaiting(ctx, job, func() (Result, error) { return l.attempt(ctx, job) })
		res.EngineWait = waited
		return res, l.closedOr(err)
	})
}

// call is what every call (Run, Session.Exec) goes through around fn: refused once
// the launcher is closed, counted in the metrics (unless internal), cancelled when
// the launcher stops, queued for an execution slot (Result.QueueWait) and given the
// default timeout when it has none.
func (l *Launcher) call(ctx context.Context, job Job, fn func(context.Context, Job) (Result, error)) (res Result, err error) {
	if !l.enter() {
		return Result{}, ErrClosed
	}
	defer l.runs.Done()
	defer func() {
		if !job.internal {
			l.opts.Metrics.ExecDone(Outcome(res, err), res)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.stop, cancel)()

	queued := time.Now()
	release, err := l.slots.acquire(ctx)
	if err != nil {
		return Result{QueueWait: since(queued)}, l.closedOr(err)
	}
	defer release()
	wait := since(queued)
	defer func() { res.QueueWait = wait }()

	if job.Timeout <= 0 {
		job.Timeout = l.opts.DefaultTimeout
	}
	return fn(ctx, job)
}

// attempt runs job in one sandbox.
func (l *Launcher) attempt(ctx context.Context, job Job) (Result, error) {
	t0 := time.Now()
	var sb *sandbox
	var warm bool
	var err error
	if job.Egress != "" {
		var closeCh func() error
		sb, closeCh, err = l.startEgress(ctx, job)
		if err == nil {
			defer closeCh() // after dispose has killed the sandbox's connections' source
		}
	} else {
		sb, warm, err = l.sandbox(ctx)
	}
	if err != nil {
		return Result{}, err
	}
	take := time.Since(t0)
	defer l.dispose(sb)
	if l.pool != nil {
		defer l.pool.busy()()
	}
	res, err := sb.exec(ctx, job)
	res.Timing = Timing{Warm: warm, Take: take, Deliver: sb.deliverTime}
	if !warm {
		res.Timing.Create, res.Timing.Start = sb.createTime, sb.startTime
	}
	return res, err
}

// sandbox returns a warm sandbox from the pool (warm), or a cold one.
func (l *Launcher) sandbox(ctx context.Context) (_ *sandbox, warm bool, _ error) {
	if l.pool == nil {
		sb, err := l.start(ctx)
		return sb, false, err
	}
	return l.pool.get(ctx)
}

// closedOr reports ErrClosed for a run that ended because the launcher closed.
func (l *Launcher) closedOr(err error) error {
	if err != nil && l.stop.Err() != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

func (l *Launcher) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.runs.Add(1)
	return true
}

// Close shuts the launcher down gracefully: it takes no new jobs and empties the warm
// pool at once, lets the runs in flight finish until ctx ends, then kills those still
// running, and waits (up to cleanupTimeout) until every container it made is removed.
// An already-ended ctx kills the runs in flight immediately.
func (l *Launcher) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stopPool()
	runsDone := waited(&l.runs)
	select {
	case <-runsDone:
	case <-ctx.Done():
		l.log.Warn().Msg("grace period over: killing the sandboxes still running")
	}
	l.cancel()
	<-runsDone
	if l.pool != nil {
		<-l.pool.stopped()
	}
	if l.spool != nil {
		<-l.spool.stopped()
	}
	cleaned := waited(&l.cleanup)
	var err error
	select {
	case <-cleaned:
	case <-time.After(cleanupTimeout):
		err = errors.New("timed out waiting for sandboxes to be removed")
	}
	// Nothing is in flight any more: whatever the engine still holds of this instance
	// goes, tracked or not (a create whose answer was lost).
	l.sweepOrphans(context.Background(), true)
	return err
}

// dispose kills and removes a sandbox in the background, on a context of its own, so
// that a result never waits for the engine's teardown and a cancelled call still
// removes its container.
func (l *Launcher) dispose(sb *sandbox) {
	sb.conn.Close()
	l.cleanup.Add(1)
	go func() {
		defer l.cleanup.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := l.remove(ctx, sb.id); err != nil {
			l.opts.Metrics.CleanupFailed()
			l.log.Warn().Err(err).Str("container_id", shortID(sb.id)).Msg("removing sandbox; trying again later")
			l.removeLater(sb.id)
			return
		}
		l.log.Debug().Str("container_id", shortID(sb.id)).Msg("sandbox removed")
	}()
}

// removeLater hands a container whose removal failed to the janitor, which tries
// again every janitorEvery while the launcher runs, and once more as it closes: an
// engine that was away for longer than cleanupTimeout still holds the container
// (stopped, its processes gone), and nothing else would remove it before the next
// start's Reap. It is called from a removal counted in l.cleanup.
func (l *Launcher) removeLater(id string) {
	l.pendMu.Lock()
	l.pending[id] = struct{}{}
	l.pendMu.Unlock()
	l.janitor.Do(func() {
		l.cleanup.Add(1)
		go l.sweep()
	})
}

func (l *Launcher) sweep() {
	defer l.cleanup.Done()
	t := time.NewTicker(l.janitorEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.sweepOnce(l.closing, l.janitorEvery)
		case <-l.closing.Done():
			// Once more, briefly, so that Close does not wait for an absent engine.
			l.sweepOnce(context.Background(), 5*time.Second)
			return
		}
	}
}

// sweepOnce tries each pending removal once, for at most per each.
func (l *Launcher) sweepOnce(parent context.Context, per time.Duration) {
	l.pendMu.Lock()
	ids := make([]string, 0, len(l.pending))
	for id := range l.pending {
		ids = append(ids, id)
	}
	l.pendMu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(parent, per)
		err := l.remove(ctx, id)
		cancel()
		if err != nil {
			continue
		}
		l.pendMu.Lock()
		delete(l.pending, id)
		l.pendMu.Unlock()
		l.log.Info().Str("container_id", shortID(id)).Msg("sandbox removed after an earlier failure")
	}
}

const cleanupTimeout = 30 * time.Second

// waited returns a channel closed once wg's count is zero.
func waited(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

func shortID(id string) string {
	if len(id) == 64 { // an engine's container id; pod names stay whole
		return id[:12]
	}
	return id
}

// errorsJoin is errors.Join that keeps a single error unwrapped for readability.
func errorsJoin(errs ...error) error {
	var keep []error
	for _, e := range errs {
		if e != nil {
			keep = append(keep, e)
		}
	}
	if len(keep) == 1 {
		return keep[0]
	}
	return errors.Join(keep...)
}

// GVisor reports whether the runtime is gVisor's runsc (backend.GVisor).
func (o Options) GVisor() bool { return backend.GVisor(o.Runtime) }
