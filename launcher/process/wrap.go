package process

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wrapperArg0 marks this binary re-executed as a run's wrapper. The server starts
// "/proc/self/exe" with this argv[0]; the package's init sees it and never returns to
// the caller's main. Nothing of the caller's ever reaches this argv: it holds the
// limits and the bootstrap's fixed command line.
const wrapperArg0 = "mcp-exec-sandbox"

// Limits are a run's rlimits. Zero means "do not set"; Core and MsgQueue are always 0.
type Limits struct {
	Data       int64 // RLIMIT_DATA: bytes of private writable memory per process
	CPUSeconds int64 // RLIMIT_CPU: CPU seconds per process
	Procs      int64 // RLIMIT_NPROC: tasks of the whole user (the server's threads count)
	FileSize   int64 // RLIMIT_FSIZE: bytes of any file written
	Files      int64 // RLIMIT_NOFILE: open descriptors per process
}

func (l Limits) args() []string {
	return []string{
		strconv.FormatInt(l.Data, 10), strconv.FormatInt(l.CPUSeconds, 10),
		strconv.FormatInt(l.Procs, 10), strconv.FormatInt(l.FileSize, 10),
		strconv.FormatInt(l.Files, 10),
	}
}

func parseLimits(a []string) (Limits, error) {
	if len(a) != 5 {
		return Limits{}, fmt.Errorf("want 5 limits, got %d", len(a))
	}
	var v [5]int64
	for i, s := range a {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Limits{}, err
		}
		v[i] = n
	}
	return Limits{Data: v[0], CPUSeconds: v[1], Procs: v[2], FileSize: v[3], Files: v[4]}, nil
}

// wrapperArgs is the argv of a run's wrapper for the command argv.
func wrapperArgs(mode string, l Limits, argv []string) []string {
	return append(append([]string{wrapperArg0, mode}, l.args()...), argv...)
}

func init() {
	if len(os.Args) < 7 || os.Args[0] != wrapperArg0 {
		return
	}
	mode := os.Args[1]
	lim, err := parseLimits(os.Args[2:7])
	var run func() error
	if err == nil && mode == "exec" {
		run, err = prepareExec(os.Args[7:])
	}
	if err == nil {
		err = confine(lim)
	}
	if err == nil {
		switch mode {
		case "exec":
			err = run()
		case "egress":
			os.Exit(egressChild(os.Args[7:]))
		case "seccomp":
			os.Exit(seccompProbe())
		case "killall":
			os.Exit(killAllHelper())
		default:
			err = fmt.Errorf("unknown mode %q", mode)
		}
	}
	fmt.Fprintf(os.Stderr, "mcp-exec: sandbox wrapper: %v\n", err)
	os.Exit(70)
}

// confine applies everything a run gets before its bootstrap starts. Each step fails
// the run rather than letting it go on with less.
func confine(l Limits) error {
	filter, err := buildFilter() // before the limits: see buildFilter
	if err != nil {
		return err
	}
	set := func(res int, v int64, name string) error {
		if v <= 0 {
			return nil
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: uint64(v), Max: uint64(v)}); err != nil {
			return fmt.Errorf("setting %s to %d: %w", name, v, err)
		}
		return nil
	}
	for _, r := range []struct {
		res  int
		v    int64
		name string
	}{
		{unix.RLIMIT_CPU, l.CPUSeconds, "RLIMIT_CPU"},
		{unix.RLIMIT_NPROC, l.Procs, "RLIMIT_NPROC"},
		{unix.RLIMIT_FSIZE, l.FileSize, "RLIMIT_FSIZE"},
		{unix.RLIMIT_NOFILE, l.Files, "RLIMIT_NOFILE"},
	} {
		if err := set(r.res, r.v, r.name); err != nil {
			return err
		}
	}
	// No core dumps (they would land in the run's directory, or worse), and no POSIX
	// message queues (they outlive the run in the container's IPC namespace).
	for _, r := range []struct {
		res  int
		name string
	}{{unix.RLIMIT_CORE, "RLIMIT_CORE"}, {unix.RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE"}} {
		if err := unix.Setrlimit(r.res, &unix.Rlimit{}); err != nil {
			return fmt.Errorf("setting %s to 0: %w", r.name, err)
		}
	}
	// Only stdin, stdout and stderr go on: descriptors the server inherited without
	// close-on-exec (from whatever started it) are not the run's.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("marking inherited descriptors close-on-exec: %w", err)
	}
	// The OOM killer takes the run, never the server (raising one's own score needs
	// no privilege).
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0); err != nil {
		return fmt.Errorf("raising oom_score_adj: %w", err)
	}
	// Every process the run starts stays below it (kept across execve).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("becoming a child subreaper: %w", err)
	}
	// RLIMIT_DATA after the steps that allocate (the file above, the errors): under the
	// race detector's heap the wrapper can be at that limit already, and an allocation
	// after it fails the run ("runtime: cannot allocate memory"). It still comes before
	// the filter and the exec, so the bootstrap and the caller's code start under it.
	if err := set(unix.RLIMIT_DATA, l.Data, "RLIMIT_DATA"); err != nil {
		return err
	}
	// Last: the run's own seccomp filter (seccomp.go), denying io_uring and the
	// process-inspection calls whatever the container's profile allows.
	return installFilter(filter)
}

// prepareExec resolves argv's command and returns its exec, to be called once confine
// has run. Everything the exec needs is converted here, before confine sets RLIMIT_DATA,
// and the exec itself is the bare execve on those pointers: it allocates nothing. Under
// the race detector's heap the wrapper can be at that limit already, and an allocation
// after it fails the run ("cannot allocate memory", or ThreadSanitizer's own "failed to
// allocate"); syscall.Exec converts argv and the environment again after the limit, and
// the bootstrap's source on argv is a large object that finds no free span. What
// syscall.Exec does besides (restoring the soft RLIMIT_NOFILE Go raised at start) is not
// wanted: confine sets that limit whenever Limits.Files is given, as the server does.
func prepareExec(argv []string) (func() error, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command")
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		p, err := lookPath(path, os.Getenv("PATH"))
		if err != nil {
			return nil, err
		}
		path = p
	}
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil, err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return nil, err
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return nil, err
	}
	return func() error {
		_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE,
			uintptr(unsafe.Pointer(pathp)),
			uintptr(unsafe.Pointer(&argvp[0])),
			uintptr(unsafe.Pointer(&envp[0])))
		runtime.KeepAlive(pathp)
		runtime.KeepAlive(argvp)
		runtime.KeepAlive(envp)
		return errno
	}, nil
}

// lookPath finds name in path without os/exec's refusal of relative entries.
func lookPath(name, path string) (string, error) {
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			continue
		}
		p := dir + "/" + name
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %q", name, path)
}
