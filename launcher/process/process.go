package process

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Options configure a Backend. Zero values are documented per field.
type Options struct {
	// Scratch is the directory runs get their private directories in: the container's
	// size-limited tmpfs. "" is "/tmp".
	Scratch string
	// Limits are every run's rlimits besides those Create takes from the Spec (Data
	// from Memory, Procs from Pids, FileSize from TmpfsSize); a field set here wins.
	Limits Limits
	// Wipe, when no run is active, removes everything of the server's user left in
	// Scratch, /dev/shm and the System V IPC namespace. Only for a server that owns its
	// container (the lockdown check passed): on a shared host it would remove the
	// user's other files.
	Wipe bool
	// SweepEvery is how often the server looks for leftovers of ended runs that were
	// reparented to it, besides after every run. 0 is 2 s.
	SweepEvery time.Duration
	// Python is the interpreter ImageID checks for; "" is "python3".
	Python string
	// Serial: at most one run has processes at a time, and no process of an ended run
	// is left when the next one starts. Start waits until every other started run is
	// removed (no sandbox for the next call exists while a run's processes do: they
	// share a user, and one could open the other's stdin through /proc), and Kill
	// ends the run with one kill(-1, SIGKILL) from a helper, which no fork can outrun.
	// Only for a server that is PID 1 of its PID namespace and not root (kill(-1)
	// spares the sender and init, and reaches every process of the user); otherwise
	// Kill falls back to the tree kill. The standalone mode sets it and refuses a pool
	// or concurrency above 1.
	Serial bool
	Log    zerolog.Logger
}

// Backend runs each sandbox as a child process of the server. Its methods are safe
// for concurrent use.
type Backend struct {
	opts Options
	uid  int

	mu   sync.Mutex      // guards runs and live, and is held across every fork
	runs map[string]*run // by id
	live map[int]bool    // pids of the runs' wrappers (their bootstraps) not yet reaped
	// shared are paths outside the runs' directories that runs write to (the output
	// directory): wiped with the scratch root, even when it lies outside it.
	shared map[string]bool
	seq    int

	removed *sync.Cond // on mu: broadcast whenever a run is removed
	// gone is when the last run that had processes was removed (every process of it
	// gone); zero before the first.
	gone time.Time

	stop chan struct{}
	done chan struct{}
}

type run struct {
	id      string
	dir     string
	limits  Limits
	shared  []string // paths outside dir the run writes to (its output directory)
	active  bool     // the program's code was written: the run is no longer a warm one
	argv    []string
	env     []string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned
	status  syscall.WaitStatus
	ooms    int64 // the container's OOM kill count when the run started
	oomSeen bool
}

// New makes a Backend and starts its background sweep; Close stops it. The server
// must be a child subreaper (MakeSubreaper) for leftovers to be reparented to it.
func New(opts Options) *Backend {
	if opts.Scratch == "" {
		opts.Scratch = "/tmp"
	}
	if opts.Python == "" {
		opts.Python = "python3"
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = 2 * time.Second
	}
	b := &Backend{
		opts: opts, uid: os.Getuid(),
		runs: map[string]*run{}, live: map[int]bool{}, shared: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	b.removed = sync.NewCond(&b.mu)
	go b.sweepLoop()
	return b
}

// Close stops the background sweep and removes every run still there.
func (b *Backend) Close(ctx context.Context) error {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	<-b.done
	b.mu.Lock()
	ids := make([]string, 0, len(b.runs))
	for id := range b.runs {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := b.Remove(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MakeSubreaper makes the calling process a child subreaper and non-dumpable: what
// the server must be before it starts any run.
func MakeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("becoming a child subreaper: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the server non-dumpable: %w", err)
	}
	return nil
}

// Ping always succeeds: there is no engine.
func (b *Backend) Ping(context.Context) error { return nil }

// ImageID identifies the interpreter the runs use (there is no image: the argument
// is ignored): a hash of its resolved path, size and time, which changes when it is
// replaced. A missing interpreter wraps backend.ErrImageMissing.
func (b *Backend) ImageID(context.Context, string) (string, error) {
	p, err := lookPath(b.opts.Python, "/usr/local/bin:/usr/bin:/bin")
	if err != nil {
		return "", fmt.Errorf("%w: the interpreter: %w", backend.ErrImageMissing, err)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("finding the interpreter: %w", err)
	}
	h := sha256.Sum256([]byte(p + "\x00" + strconv.FormatInt(st.Size(), 10) + "\x00" + st.ModTime().String()))
	return "process:" + hex.EncodeToString(h[:8]), nil
}

// Name identifies the backend for the start-up log.
func (b *Backend) Name(context.Context) (string, error) {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return "child processes (Linux " + unix.ByteSliceToString(u.Release[:]) + ")", nil
}

// Create makes a run's private directory and records its command, whose paths under
// spec.WorkDir (and those of its environment) are moved into that directory. Memory,
// Pids and TmpfsSize become rlimits; the rest of the Spec (image, user, hostname,
// CPUs, runtime) is the container's, which the lockdown check verified.
func (b *Backend) Create(_ context.Context, spec backend.Spec) (string, error) {
	if spec.EgressDir != "" || spec.EgressConns != nil {
		return "", errors.New("egress profiles are not supported on the process backend: nothing proves that only the proxy is reachable")
	}
	// The directory is made and registered under mu, which a wipe holds throughout:
	// a wipe never takes a directory that is not registered yet.
	b.mu.Lock()
	defer b.mu.Unlock()
	dir, err := newRunDir(b.opts.Scratch)
	if err != nil {
		return "", err
	}
	r := &run{dir: dir, exited: make(chan struct{}), limits: b.limitsFor(spec)}
	// Paths under WorkDir in the command (the bootstrap's output directory) stay as
	// they are, since programs name them absolutely (/tmp/outputs); the run's
	// directory gets a link of the same relative name to each, so that relative names
	// (outputs/x, as in a container whose working directory is /tmp) reach them too.
	// They are shared by concurrent runs, and wiped with the scratch root.
	r.argv = slices.Clone(spec.Command)
	for _, a := range spec.Command {
		if rel, ok := strings.CutPrefix(a, spec.WorkDir+"/"); ok && spec.WorkDir != "" && !strings.Contains(rel, "/") {
			if err := os.Symlink(a, filepath.Join(dir, rel)); err != nil {
				return "", errors.Join(fmt.Errorf("linking %s into the run directory: %w", a, err), removeTree(dir))
			}
			r.shared = append(r.shared, a)
			b.shared[a] = true
		}
	}
	r.env = rebaseEnv(spec.Env, spec.WorkDir, dir)
	b.seq++
	r.id = "proc-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(b.seq)
	b.runs[r.id] = r
	return r.id, nil
}

// limitsFor is a run's rlimits. RLIMIT_NPROC counts every task of the user, the
// server's threads included, and the container's pids limit counts them too: the run
// gets at most the container's limit less a reserve for the server, so that a fork
// bomb meets its rlimit before the container's limit stops the server's own threads.
func (b *Backend) limitsFor(spec backend.Spec) Limits {
	l := Limits{Data: spec.Memory, Procs: runProcs(spec.Pids), FileSize: spec.TmpfsSize}
	o := b.opts.Limits
	for _, f := range []struct {
		dst *int64
		v   int64
	}{
		{&l.Data, o.Data}, {&l.Procs, o.Procs}, {&l.FileSize, o.FileSize},
		{&l.CPUSeconds, o.CPUSeconds}, {&l.Files, o.Files},
	} {
		if f.v > 0 {
			*f.dst = f.v
		}
	}
	return l
}

// serverTasks is the share of the container's pids limit kept for the server.
const serverTasks = 32

// containerPids reads the container's pids limit (cgroup v2, then v1); 0 if none.
func containerPids() int64 {
	for _, p := range []string{"/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && n > 0 {
			return n
		}
		return 0
	}
	return 0
}

func (b *Backend) get(id string) (*run, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.runs[id]
	if r == nil {
		return nil, fmt.Errorf("run %s: %w", id, backend.ErrNotFound)
	}
	return r, nil
}

// Conn is a started run's standard streams.
type Conn struct {
	b     *Backend
	r     *run
	stdin *os.File
	once  sync.Once
	done  chan struct{}
}

// Write writes to the run's stdin; the first write (the program's code) makes the run
// active: from then on it holds the caller's data, and no wipe runs until it is removed.
//
// The launcher removes a sandbox in the background after its result is returned, so
// the next run may start before the previous one is removed. Its code is not
// delivered before that removal (which kills the previous run's leftovers and wipes
// what it left) is complete.
func (c *Conn) Write(p []byte) (int, error) {
	if err := c.b.activate(c.r); err != nil {
		return 0, err
	}
	return c.stdin.Write(p)
}

// removalWait bounds how long a run's code waits for ended runs to be removed.
const removalWait = 60 * time.Second

// activate marks r active once every other run that has ended is removed.
func (b *Backend) activate(r *run) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.active {
		return nil
	}
	if !b.waitRemoved(func() bool { return !b.endedOthers(r) }) {
		return errors.New("a previous run is still being removed after 60 s: not delivering the code")
	}
	if b.opts.Serial && r.cmd != nil {
		// No process but this run's may exist when its code is written.
		if left := b.leftovers(r.cmd.Process.Pid); len(left) > 0 {
			return fmt.Errorf("processes %v of an ended run are still there: not delivering the code", left)
		}
	}
	r.active = true
	return nil
}

// waitAlone waits (mu held) until r is the only run that has been started and not
// removed, for at most removalWait.
func (b *Backend) waitAlone(r *run) error {
	alone := func() bool {
		for _, o := range b.runs {
			if o != r && o.cmd != nil {
				return false
			}
		}
		return true
	}
	if !b.waitRemoved(alone) {
		return errors.New("a previous run is still being removed after 60 s: not starting the next sandbox beside its processes")
	}
	return nil
}

// waitRemoved waits (mu held) on b.removed until ok reports true, for at most
// removalWait; false: it did not in time.
func (b *Backend) waitRemoved(ok func() bool) bool {
	timer := time.AfterFunc(removalWait, func() {
		b.mu.Lock()
		b.removed.Broadcast()
		b.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(removalWait)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		b.removed.Wait()
	}
	return true
}

// Quiet reports whether no run has processes and the last one that had was removed
// at least d ago: a signal that arrives then cannot come from a program (none is
// left, nor was one a moment ago).
func (b *Backend) Quiet(d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.runs {
		if r.cmd != nil {
			return false
		}
	}
	return b.gone.IsZero() || time.Since(b.gone) >= d
}

// endedOthers reports whether a run other than r has ended (or was never started)
// but is not removed yet. Called with mu held.
func (b *Backend) endedOthers(r *run) bool {
	for _, o := range b.runs {
		if o == r || !o.active {
			continue
		}
		select {
		case <-o.exited:
			return true
		default:
		}
	}
	return false
}

// CloseWrite closes the run's stdin: the program reads end of file.
func (c *Conn) CloseWrite() error {
	var err error
	c.once.Do(func() { err = c.stdin.Close() })
	return err
}

// Close drops the streams; it does not stop the run.
func (c *Conn) Close() error { return c.CloseWrite() }

// Done is closed once stdout and stderr have ended and been copied.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Start starts a created run through its wrapper, with three pipes as its only
// descriptors, and copies its stdout and stderr into the writers until they end.
func (b *Backend) Start(_ context.Context, id string, stdout, stderr io.Writer) (backend.Conn, error) {
	r, err := b.get(id)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (*os.File, *os.File, error) {
		pr, pw, err := os.Pipe()
		if err == nil {
			files = append(files, pr, pw)
		}
		return pr, pw, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, fmt.Errorf("making pipes: %w", err)
	}
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   wrapperArgs("exec", r.limits, r.argv),
		Env:    r.env,
		Dir:    r.dir,
		Stdin:  inR,
		Stdout: outW,
		Stderr: errW,
		// A session of its own (so a process group of its own), so that a terminal's
		// ^C to the server's group never reaches a run, and a program can neither join
		// the server's process group (setpgid does not cross sessions) to signal it
		// with kill(0, ...) nor reach a controlling terminal. No Pdeathsig: it fires
		// when the forking OS thread exits, not the server; the server is its
		// container's PID 1, whose end ends every run.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	b.mu.Lock()
	if b.opts.Serial {
		err = b.waitAlone(r)
	}
	if err == nil {
		r.ooms = oomKills()
		err = cmd.Start()
	}
	if err == nil {
		r.cmd = cmd
		b.live[cmd.Process.Pid] = true
	}
	b.mu.Unlock()
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	if err != nil {
		_ = inW.Close()
		_ = outR.Close()
		_ = errR.Close()
		return nil, fmt.Errorf("starting run %s: %w", id, err)
	}
	go func() {
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			r.status = ws
		} else if err != nil {
			r.status = syscall.WaitStatus(70 << 8)
		}
		r.oomSeen = oomKills() > r.ooms
		b.mu.Lock()
		delete(b.live, cmd.Process.Pid)
		b.mu.Unlock()
		// As when a container's PID 1 ends: what the run left (reparented to the
		// server, since its bootstrap was their subreaper) dies with it, and the
		// pipes it may hold close.
		b.sweep()
		close(r.exited)
	}()
	c := &Conn{b: b, r: r, stdin: inW, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	for _, p := range []struct {
		r *os.File
		w io.Writer
	}{{outR, stdout}, {errR, stderr}} {
		go func() {
			defer wg.Done()
			_, _ = io.Copy(p.w, p.r)
			_ = p.r.Close()
		}()
	}
	go func() { wg.Wait(); close(c.done) }()
	return c, nil
}

// Kill stops and kills the run's bootstrap and every process below it, then sweeps
// what was reparented to the server on the way. With Serial (and when the server is
// PID 1), it kills every process of the user but the server instead (killAll).
func (b *Backend) Kill(_ context.Context, id string) error {
	r, err := b.get(id)
	if err != nil {
		return err
	}
	if r.cmd == nil {
		return nil
	}
	if b.killsAll() {
		// The only run with processes: every process of the user but the server is
		// one of its, or a leftover of it.
		if err := b.killAll(); err != nil {
			return fmt.Errorf("killing run %s: %w", id, err)
		}
		return nil
	}
	select {
	case <-r.exited:
	default:
		if _, err = killTree(r.cmd.Process.Pid, true); err != nil {
			err = fmt.Errorf("killing run %s: %w", id, err)
		}
	}
	b.sweep()
	return err
}

// Inspect waits (until ctx ends) for the run's bootstrap to be reaped and reports
// how it ended.
func (b *Backend) Inspect(ctx context.Context, id string) (backend.Exit, error) {
	r, err := b.get(id)
	if err != nil {
		return backend.Exit{}, err
	}
	if r.cmd == nil {
		return backend.Exit{}, nil
	}
	select {
	case <-r.exited:
	case <-ctx.Done():
		return backend.Exit{Running: true}, nil
	}
	ws := r.status
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return backend.Exit{Code: code, OOMKilled: ws.Signaled() && ws.Signal() == syscall.SIGKILL && r.oomSeen}, nil
}

// Remove kills the run (and everything below it), waits for it, removes its
// directory, and, when no other run is active, wipes what the run may have left
// elsewhere. A run already removed is ErrNotFound.
func (b *Backend) Remove(ctx context.Context, id string) error {
	r, err := b.get(id)
	if err != nil {
		return err
	}
	var errs []error
	if r.cmd != nil {
		if err := b.Kill(ctx, id); err != nil {
			errs = append(errs, err)
		}
		select {
		case <-r.exited:
		case <-ctx.Done():
			return fmt.Errorf("removing run %s: its bootstrap did not end: %w", id, ctx.Err())
		}
		// Below the reaped bootstrap nothing can remain (it was a subreaper, and its
		// orphans went to the server): sweep them.
		if !b.opts.Serial {
			b.sweep()
		} else if left := b.settle(); len(left) > 0 {
			// The run stays (and the next one waits for it, then fails) while any
			// process of it is left, a zombie included (it holds a share of the pids
			// limit until it is reaped).
			return errors.Join(append(errs, fmt.Errorf("removing run %s: %d of its processes are still there after being killed (pids %v)", id, len(left), left))...)
		}
	}
	if err := removeTree(r.dir); err != nil {
		errs = append(errs, err)
	}
	b.mu.Lock()
	delete(b.runs, id)
	if r.cmd != nil {
		b.gone = time.Now()
	}
	b.mu.Unlock()
	if b.opts.Wipe {
		if err := b.wipe(); err != nil {
			errs = append(errs, err)
		}
	}
	b.mu.Lock()
	b.removed.Broadcast()
	b.mu.Unlock()
	return errors.Join(errs...)
}

// KillActive kills every run that holds a caller's data (its code was written) and
// is still running, and returns how many there were.
func (b *Backend) KillActive() int {
	b.mu.Lock()
	var ids []string
	for id, r := range b.runs {
		if !r.active || r.cmd == nil {
			continue
		}
		select {
		case <-r.exited:
		default:
			ids = append(ids, id)
		}
	}
	b.mu.Unlock()
	for _, id := range ids {
		_ = b.Kill(context.Background(), id)
	}
	return len(ids)
}

// List returns the runs that exist (for the launcher's reaping); a restarted server
// has none: its runs died with its container.
func (b *Backend) List(context.Context, string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.runs))
	for id := range b.runs {
		ids = append(ids, id)
	}
	return ids, nil
}

// wipe removes what any run may have left outside its directory, when no run that
// holds a caller's data is left: the scratch root (but the directories of the warm
// runs, which hold no caller's data yet), /dev/shm, /dev/mqueue and System V IPC.
func (b *Backend) wipe() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := map[string]bool{}
	for _, r := range b.runs {
		if r.active {
			return nil // another run is under way: the last one to end wipes
		}
		keep[r.dir] = true
	}
	var errs []error
	for p := range b.shared {
		if err := removeTree(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(
		errors.Join(errs...),
		wipeDir(b.opts.Scratch, b.uid, keep),
		wipeDir("/dev/shm", b.uid, nil),
		wipeDir("/dev/mqueue", b.uid, nil),
		wipeIPC(b.uid),
	)
}

func (b *Backend) sweepLoop() {
	defer close(b.done)
	t := time.NewTicker(b.opts.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.sweep()
		}
	}
}

// sweep kills every child of the server that is not a live run's wrapper (with all
// its descendants) and reaps it. Such a child can only be a process a run left behind
// whose own bootstrap is gone: it was reparented to the server, its subreaper.
func (b *Backend) sweep() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	self := os.Getpid()
	total := 0
	for round := 0; round < 100; round++ {
		procs, err := readProcs()
		if err != nil {
			b.opts.Log.Warn().Err(err).Msg("sweep: reading /proc")
			return total
		}
		var strays []int
		for _, p := range procs {
			if p.ppid == self && !b.live[p.pid] {
				strays = append(strays, p.pid)
			}
		}
		if len(strays) == 0 {
			break
		}
		if b.idleKillsAll() {
			// No run is alive: every stray at once, however it forks (killall.go).
			if err := runKillHelper(); err != nil {
				b.opts.Log.Warn().Err(err).Msg("sweep: killing strays")
			}
			total += len(strays)
		} else {
			for _, pid := range strays {
				n, _ := killTree(pid, true)
				total += n
			}
		}
		for _, pid := range strays {
			var ws unix.WaitStatus
			// The stray is killed: reap it (a bounded wait, a D-state process may linger).
			for i := 0; i < 500; i++ {
				got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				if got == pid || err != nil {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	if total > 0 {
		b.opts.Log.Warn().Int("killed", total).Msg("killed processes left behind by ended runs")
	}
	return total
}

// oomKills is the OOM kill count of the container's memory cgroup (v2, then v1).
func oomKills() int64 {
	for _, f := range []struct{ path, key string }{
		{"/sys/fs/cgroup/memory.events", "oom_kill"},
		{"/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		for _, line := range splitLines(string(b)) {
			k, v, _ := cutSpace(line)
			if k == f.key {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}
