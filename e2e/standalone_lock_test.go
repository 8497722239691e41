package e2e_test

// The two locks whose answer depends on the host: swap (usable only where the host has
// swap) and io_uring (allowed by Docker 20.10's default seccomp profile, denied by each
// run's own filter). Started with docs/standalone.md's command, exactly.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// hostSwapKB reads SwapTotal from the host's /proc/meminfo (the container's kernel).
func hostSwapKB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^SwapTotal:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no SwapTotal in /proc/meminfo")
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// saStart starts the image over stdio with no input (it serves, sees the end of its
// input and exits) and returns its exit code and stderr.
func saStart(t *testing.T, img string, flags []string) (int, string) {
	t.Helper()
	code, stderr, err := saRun(t, img, flags, nil)
	if code == -1 {
		t.Fatalf("docker run: %v", err)
	}
	return code, stderr
}

// TestStandaloneSwapLock: without --memory-swap Docker lets the container's memsw be
// twice its memory limit. On a host with swap that is a missing lock (the start
// fails, naming it); on a host without swap (this project's) no run can swap: the
// server starts and says at warn level what it saw and why it passed. With
// --memory-swap equal to --memory there is nothing to say either way.
func TestStandaloneSwapLock(t *testing.T) {
	img := saImage(t)
	swap := hostSwapKB(t)
	code, stderr := saStart(t, img, saLocked)
	if swap > 0 {
		if code != 1 || !strings.Contains(stderr, `"no swap beyond the memory limit" missing: `) || !strings.Contains(stderr, fmt.Sprintf("the host has %d kB of swap", swap)) {
			t.Fatalf("host with %d kB of swap, no --memory-swap: got exit %d, stderr:\n%s\nwant exit 1 naming the swap lock", swap, code, stderr)
		}
	} else {
		note := regexp.MustCompile(`"level":"warn"[^\n]*standalone lockdown: swap: (memory\.memsw\.limit_in_bytes is 536870912, more than memory\.limit_in_bytes 268435456|memory\.swap\.max is max, want 0), but the host has no swap \(SwapTotal 0 kB`)
		if code != 0 || !note.MatchString(stderr) || !strings.Contains(stderr, "process backend ready") {
			t.Fatalf("host without swap, no --memory-swap: got exit %d, stderr:\n%s\nwant a start, a warning matching %s", code, stderr, note)
		}
	}
	code, stderr = saStart(t, img, append([]string{"--memory-swap", "256m"}, saLocked...))
	if code != 0 || strings.Contains(stderr, "standalone lockdown: swap:") || !strings.Contains(stderr, "process backend ready") {
		t.Fatalf("with --memory-swap 256m: got exit %d, stderr:\n%s\nwant a start without a swap note", code, stderr)
	}
}

// TestStandaloneSeccompPerRun: with the runtime's default profile (no --security-opt
// seccomp), a run's io_uring_setup fails with EPERM and the run carries two seccomp
// filters more than the server (its own and the bootstrap's); the start-up check logged EPERM for every denied call.
// The control: the same code run directly in the same image with the same flags (no
// server, so no per-run filter) gets a ring from Docker 20.10's default profile; on an
// engine whose profile denies io_uring the control says so and proves nothing more.
func TestStandaloneSeccompPerRun(t *testing.T) {
	img := saImage(t)
	const code = `
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = {"x86_64": 425, "aarch64": 425}[platform.machine()]
params = ctypes.create_string_buffer(120)
ctypes.set_errno(0)
r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(1), params)
print("uring", r, ctypes.get_errno())
def filters(pid):
    for l in open("/proc/%s/status" % pid):
        if l.startswith("Seccomp_filters:"):
            return int(l.split()[1])
print("filters", filters("self"), filters(1))
`
	ctl, err := exec.CommandContext(t.Context(), "docker", append(append([]string{"run", "--rm", "--name", saName(t)}, saLocked...),
		"--entrypoint", "python3", img, "-c", code)...).CombinedOutput()
	if err != nil {
		t.Fatalf("control (python3 directly, no server): %v\n%s", err, ctl)
	}
	ctlRing := !strings.Contains(string(ctl), "uring -1 ")
	t.Logf("control, no per-run filter:\n%s", ctl)

	s := saSession(t, img)
	res := saExec(t, s, code, 0)
	if got := saLine(t, res, "uring "); got != "-1 1" {
		t.Errorf("io_uring_setup in a run: got result/errno %s, want -1 1 (EPERM)", got)
	}
	var run, server int
	// The run's own filter (the wrapper's, with the signal guard) and the bootstrap's,
	// which it installs on every backend.
	if n, _ := fmt.Sscan(saLine(t, res, "filters "), &run, &server); n != 2 || run != server+2 {
		t.Errorf("seccomp filters of the run and the server: got %d and %d, want the run to carry two more (its own and the bootstrap's)", run, server)
	}
	if !ctlRing {
		t.Logf("the runtime's profile denies io_uring already: the control proves nothing about the per-run filter here")
	}

	code2, stderr := saStart(t, img, saLocked)
	// Every denied call, then the kernel rules (syscalls.Kernel), clone with a namespace
	// flag and clone3, in the order the check makes them.
	var want []string
	for _, n := range syscalls.Names() {
		want = append(want, strconv.Quote(n+"=EPERM"))
	}
	for _, k := range syscalls.Kernel {
		want = append(want, strconv.Quote(k.Name+"=EPERM"))
	}
	want = append(want, strconv.Quote("clone(CLONE_NEWUSER)=EPERM"), strconv.Quote("clone3=ENOSYS"))
	if code2 != 0 || !strings.Contains(stderr, `"seccomp_child":[`+strings.Join(want, ",")+`]`) {
		t.Errorf("start-up log: got exit %d, stderr:\n%s\nwant seccomp_child %v", code2, stderr, want)
	}
}

// TestStandaloneNprocWarning: the kernel counts RLIMIT_NPROC per uid across the host.
// Started alone with a uid of its own (random), the server logs the uid's tasks, the
// same count here and on the host, and no warning; beside another container of that
// uid holding 40 tasks, it starts all the same and warns at start-up, with that count
// and the fix (docs/standalone.md, *Fail closed*).
func TestStandaloneNprocWarning(t *testing.T) {
	img := saImage(t)
	uid := 60000 + rand.IntN(5000)
	user := fmt.Sprintf("%d:%d", uid, uid)
	flags := replaced(saLocked, "--user", user)
	counts := regexp.MustCompile(`"uid_tasks_host":(\d+),"uid_tasks_here":(\d+)`)
	code, stderr := saStart(t, img, flags)
	m := counts.FindStringSubmatch(stderr)
	if code != 0 || m == nil || m[1] != m[2] || strings.Contains(stderr, "RLIMIT_NPROC:") || !strings.Contains(stderr, "process backend ready") {
		t.Fatalf("alone as uid %d: got exit %d, stderr:\n%s\nwant a start, uid_tasks_host equal to uid_tasks_here, no RLIMIT_NPROC warning", uid, code, stderr)
	}

	const held = 40
	launchertest.Neighbour(t, "docker", user, held)
	code, stderr = saStart(t, img, flags)
	warn := regexp.MustCompile(fmt.Sprintf(`"level":"warn"[^\n]*standalone lockdown: RLIMIT_NPROC: uid %d already has %d tasks on this host outside this container [^\n]*a uid of its own`, uid, held))
	if code != 0 || !warn.MatchString(stderr) || !strings.Contains(stderr, "process backend ready") {
		t.Fatalf("beside a container of uid %d with %d tasks: got exit %d, stderr:\n%s\nwant a start and a warning matching %s", uid, held, code, stderr, warn)
	}
}
