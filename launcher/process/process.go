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
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Options configure a Backend. Zero values are documented per field.
type Options struct {
	// Scratch is the directory runs get their private directories in: the container's
	// size-limited tmpfs. "" is "/tmp".
	Scratch string
	// Limits are every run's rlimits.
	Limits Limits
	// Wipe, when no run is active, removes everything of the server's user left in
	// Scratch, /dev/shm and the System V IPC namespace. Only for a server that owns its
	// container (the lockdown check passed): on a shared host it would remove the
	// user's other files.
	Wipe bool
	// SweepEvery is how often the server looks for leftovers of ended runs that were
	// reparented to it, besides after every run. 0 is 2 s.
	SweepEvery time.Duration
	Log        zerolog.Logger
}

// Backend runs each sandbox as a child process of the server. Its methods are safe
// for concurrent use.
type Backend struct {
	opts Options
	uid  int

	mu   sync.Mutex      // guards runs and live, and is held across every fork
	runs map[string]*run // by id
	live map[int]bool    // pids of the runs' wrappers (their bootstraps) not yet reaped
	seq  int

	stop chan struct{}
	done chan struct{}
}

type run struct {
	id      string
	dir     string
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
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = 2 * time.Second
	}
	b := &Backend{
		opts: opts, uid: os.Getuid(),
		runs: map[string]*run{}, live: map[int]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
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

// ImageID identifies the interpreter the runs use: a hash of its resolved path and
// size, which changes when it is replaced.
func (b *Backend) ImageID(_ context.Context, python string) (string, error) {
	p, err := lookPath(python, "/usr/local/bin:/usr/bin:/bin")
	if err != nil {
		return "", fmt.Errorf("finding the interpreter: %w", err)
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
// workDir (and those of its environment) are moved into that directory.
func (b *Backend) Create(_ context.Context, argv, env []string, workDir string) (string, error) {
	dir, err := newRunDir(b.opts.Scratch)
	if err != nil {
		return "", err
	}
	r := &run{dir: dir, exited: make(chan struct{})}
	r.argv = make([]string, len(argv))
	for i, a := range argv {
		r.argv[i] = rebase(a, workDir, dir)
	}
	r.env = rebaseEnv(env, workDir, dir)
	b.mu.Lock()
	b.seq++
	r.id = "proc-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(b.seq)
	b.runs[r.id] = r
	b.mu.Unlock()
	return r.id, nil
}

func (b *Backend) get(id string) (*run, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.runs[id]
	if r == nil {
		return nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return r, nil
}

// ErrNotFound: the run does not exist (any more).
var ErrNotFound = errors.New("sandbox not found")

// Conn is a started run's standard streams.
type Conn struct {
	stdin *os.File
	once  sync.Once
	done  chan struct{}
}

func (c *Conn) Write(p []byte) (int, error) { return c.stdin.Write(p) }

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
func (b *Backend) Start(_ context.Context, id string, stdout, stderr io.Writer) (*Conn, error) {
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
		Args:   wrapperArgs("exec", b.opts.Limits, r.argv),
		Env:    r.env,
		Dir:    r.dir,
		Stdin:  inR,
		Stdout: outW,
		Stderr: errW,
		// Its own process group, so that a terminal's ^C to the server's group never
		// reaches a run.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	b.mu.Lock()
	r.ooms = oomKills()
	err = cmd.Start()
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
	c := &Conn{stdin: inW, done: make(chan struct{})}
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
// what was reparented to the server on the way.
func (b *Backend) Kill(_ context.Context, id string) error {
	r, err := b.get(id)
	if err != nil {
		return err
	}
	if r.cmd == nil {
		return nil
	}
	select {
	case <-r.exited:
	default:
		if _, err := killTree(r.cmd.Process.Pid, true); err != nil {
			return fmt.Errorf("killing run %s: %w", id, err)
		}
	}
	b.sweep()
	return nil
}

// Exit is how a run ended.
type Exit struct {
	Running   bool
	Code      int
	OOMKilled bool
}

// Inspect waits (until ctx ends) for the run's bootstrap to be reaped and reports
// how it ended.
func (b *Backend) Inspect(ctx context.Context, id string) (Exit, error) {
	r, err := b.get(id)
	if err != nil {
		return Exit{}, err
	}
	if r.cmd == nil {
		return Exit{Running: false, Code: 0}, nil
	}
	select {
	case <-r.exited:
	case <-ctx.Done():
		return Exit{Running: true}, nil
	}
	ws := r.status
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return Exit{Code: code, OOMKilled: ws.Signaled() && ws.Signal() == syscall.SIGKILL && r.oomSeen}, nil
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
		b.sweep()
	}
	if err := removeTree(r.dir); err != nil {
		errs = append(errs, err)
	}
	b.mu.Lock()
	delete(b.runs, id)
	quiet := len(b.runs) == 0
	b.mu.Unlock()
	if quiet && b.opts.Wipe {
		if err := b.wipe(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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

// wipe removes what any run may have left outside its directory.
func (b *Backend) wipe() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.runs) != 0 {
		return nil // a run started meanwhile: the next quiet moment wipes
	}
	return errors.Join(
		wipeDir(b.opts.Scratch, b.uid, nil),
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
		for _, pid := range strays {
			n, _ := killTree(pid, true)
			total += n
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
