package process

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// The per-run seccomp filter. The container's runtime gives the server and every run
// its default profile, which on Docker before 25 allows io_uring; so every run's
// wrapper adds a filter of its own before it execs the bootstrap: launcher/syscalls'
// (Denied and Kernel with the same errno as the container backends, other ABIs
// killed), with the signal guard (signalguard.go) spliced in. A filter is inherited by
// every thread and child and survives execve; none can be removed. An unprivileged
// process may install one once no_new_privs is set (the container sets it: a lock; the
// wrapper sets it again). The bootstrap then installs launcher/syscalls' filter once
// more, as in every sandbox: the kernel applies both.

// seccomp_data offsets, for the tests' interpreter.
const (
	offNr   = syscalls.OffNr
	offArch = syscalls.OffArch
)

// filterProgram is launcher/syscalls' filter for goarch, as x/net/bpf instructions
// (for the guard's splicing and the tests' interpreter).
func filterProgram(goarch string) ([]bpf.Instruction, error) {
	prog, err := syscalls.Filter(goarch)
	if err != nil {
		return nil, err
	}
	raw := make([]bpf.RawInstruction, len(prog))
	for i, in := range prog {
		raw[i] = bpf.RawInstruction{Op: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	out, ok := bpf.Disassemble(raw)
	if !ok {
		return nil, fmt.Errorf("building the seccomp filter: an instruction x/net/bpf does not know")
	}
	return out, nil
}

func isRet(i bpf.Instruction) bool { _, ok := i.(bpf.RetConstant); return ok }

// buildFilter assembles the filter for the running architecture (filterProgram and
// the signal guard). confine calls it before it sets the run's limits: it is the
// wrapper's one sizeable allocation, which under RLIMIT_DATA could fail (seen under the
// race detector's heap: "runtime: cannot allocate memory").
func buildFilter() ([]unix.SockFilter, error) {
	prog, err := filterProgram(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	// The signal guard (signalguard.go): a block of its own before the final allow.
	guard, err := guardProgram(runtime.GOARCH, serverTargets())
	if err == nil {
		prog, err = spliceGuard(prog, guard)
	}
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assembling the seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return filter, nil
}

// installFilter sets no_new_privs and installs filter (buildFilter) on every thread
// of this process (TSYNC), so that the thread that execs next carries it whichever it
// is. Any failure is returned: the wrapper then does not exec the run.
func installFilter(filter []unix.SockFilter) error {
	if len(filter) == 0 {
		return fmt.Errorf("installing the seccomp filter: it is empty")
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("installing the seccomp filter (seccomp(SECCOMP_SET_MODE_FILTER, TSYNC)): %w", e)
	}
	runtime.KeepAlive(filter)
	return nil
}

// seccompProbe calls every denied syscall with the arguments (-1, 0, 0, 0, 0, 0) and
// prints one line per call: "NAME ERRNO" (0 when the call went through). The start-up
// check runs it in a filtered child and requires EPERM from each. kernelProbe
// (seccomp_kernel.go) adds the calls of the filter's kernel rules.
func seccompProbe() int {
	_, nrs, err := syscalls.Numbers(runtime.GOARCH)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	for i, s := range syscalls.Denied {
		r, _, e := unix.Syscall6(uintptr(nrs[i]), ^uintptr(0), 0, 0, 0, 0, 0)
		if e == 0 && s.Name == "io_uring_setup" {
			_ = unix.Close(int(r)) // a ring: the filter is missing
		}
		fmt.Printf("%s %d\n", s.Name, int(e))
	}
	if err := kernelProbe(runtime.GOARCH); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// checkSeccomp runs the seccomp probe in a child started as a run's wrapper is (this
// binary re-executed, confined, filtered) and returns what it saw when any denied
// syscall was not refused with EPERM. arg0 is the wrapper's argv[0]; only tests
// change it (to run the probe unfiltered).
func checkSeccomp(ctx context.Context, arg0 string) (seen []string, err error) {
	args := wrapperArgs("seccomp", Limits{}, nil)
	if arg0 != "" {
		args[0] = arg0
	}
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = args
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("running the seccomp child: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	var bad []string
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, line := range lines {
		name, e, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("seccomp child: unexpected line %q", line)
		}
		seen = append(seen, name+"="+errnoName(e))
		if want := wantErrno(name); e != want {
			bad = append(bad, name+" "+errnoName(e))
		}
	}
	kernel, err := kernelProbeCalls(runtime.GOARCH)
	if err != nil {
		return seen, err
	}
	if want := len(syscalls.Denied) + len(kernel); len(lines) != want {
		return seen, fmt.Errorf("seccomp child: got %d results, want %d", len(lines), want)
	}
	if len(bad) > 0 {
		return seen, fmt.Errorf("in a run's child, %s: want EPERM from each (ENOSYS from clone3)", strings.Join(bad, ", "))
	}
	return seen, nil
}

func errnoName(s string) string {
	n, err := strconv.Atoi(s)
	if err != nil {
		return s
	}
	if n == 0 {
		return "allowed"
	}
	return unix.ErrnoName(syscall.Errno(n))
}
