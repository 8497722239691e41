package process

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// TestFilterKernelRules runs the whole filter in a BPF interpreter for each
// architecture: every Kernel call gets EPERM, clone3 ENOSYS, clone with any
// namespace flag EPERM, and clone without one (threads, fork) passes.
func TestFilterKernelRules(t *testing.T) {
	const (
		eperm  = unix.SECCOMP_RET_ERRNO | 1
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		allow  = unix.SECCOMP_RET_ALLOW
	)
	for goarch, audit := range map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64} {
		t.Run(goarch, func(t *testing.T) {
			prog, err := filterProgram(goarch)
			if err != nil {
				t.Fatal(err)
			}
			vm, err := bpf.NewVM(prog)
			if err != nil {
				t.Fatalf("the interpreter refuses the filter: %v", err)
			}
			run := func(nr uint32, arg0 uint32) uint32 {
				t.Helper()
				b := seccompData(nr, audit)
				binary.BigEndian.PutUint32(b[offArg0:], arg0)
				v, err := vm.Run(b)
				if err != nil {
					t.Fatalf("running the filter: %v", err)
				}
				return uint32(v)
			}
			nrs, _ := syscalls.KernelNumbers(goarch)
			for i, nr := range nrs {
				if got := run(nr, 0); got != eperm {
					t.Errorf("%s: got %#x, want ERRNO|EPERM", syscalls.Kernel[i].Name, got)
				}
			}
			if got := run(syscalls.Clone3.Number(goarch), 0); got != enosys {
				t.Errorf("clone3: got %#x, want ERRNO|ENOSYS", got)
			}
			clone := syscalls.Clone.Number(goarch)
			for _, f := range []uint32{unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWNET, unix.CLONE_NEWPID, unix.CLONE_NEWIPC, unix.CLONE_NEWUTS, unix.CLONE_NEWCGROUP} {
				if got := run(clone, f|sigchld); got != eperm {
					t.Errorf("clone(%#x): got %#x, want ERRNO|EPERM", f, got)
				}
			}
			// pthread_create's flags, and fork's.
			thread := uint32(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID)
			for _, f := range []uint32{thread, unix.CLONE_CHILD_SETTID | unix.CLONE_CHILD_CLEARTID | sigchld, sigchld} {
				if got := run(clone, f); got != allow {
					t.Errorf("clone(%#x) without namespace flags: got %#x, want ALLOW", f, got)
				}
			}
			// A call the rules do not decide falls through with its number: the
			// Denied list before them still answers, read and write pass.
			if got := run(0, unix.CLONE_NEWUSER); got != allow {
				t.Errorf("nr 0 with arg0 CLONE_NEWUSER: got %#x, want ALLOW", got)
			}
		})
	}
}

// kernelCode makes, through ctypes, each call of the kernel rules with (-1, 0, ...),
// the namespace calls with the arguments that would work (unshare(CLONE_NEWUSER),
// clone(CLONE_NEWUSER|SIGCHLD), setns on its own user namespace),
// keyctl on the user keyring, add_key, userfaultfd(0), a software perf counter of
// itself, clone3; then starts threads and a subprocess, which must still work.
const sigchld = uint32(unix.SIGCHLD)

func kernelCode() string {
	nrs, _ := syscalls.KernelNumbers(runtime.GOARCH)
	var b strings.Builder
	b.WriteString(`import ctypes, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(nr), *args)
    e = ctypes.get_errno()
    if r == 0 and name.startswith("clone("):
        os._exit(0)  # the child, should the filter let it through
    if r > 0 and name.startswith("clone("):
        os.waitpid(r, 0)
    print("call", name, -1 if r < 0 else 0, e, flush=True)
attr = ctypes.create_string_buffer(128)  # perf_event_attr: type SOFTWARE, size, config CPU_CLOCK
attr[0] = 1
attr[4] = 112
`)
	for i, s := range syscalls.Kernel {
		fmt.Fprintf(&b, "call(%q, %d, L(-1), L(0), L(0), L(0), L(0), L(0))\n", s.Name, nrs[i])
	}
	nr := func(s syscalls.Syscall) uint32 { return s.Number(runtime.GOARCH) }
	byName := map[string]uint32{}
	for i, s := range syscalls.Kernel {
		byName[s.Name] = nrs[i]
	}
	fmt.Fprintf(&b, "call('clone(CLONE_NEWUSER)', %d, L(%d), L(0), L(0), L(0), L(0))\n", nr(syscalls.Clone), unix.CLONE_NEWUSER|sigchld)
	fmt.Fprintf(&b, "call('clone(CLONE_NEWNET)', %d, L(%d), L(0), L(0), L(0), L(0))\n", nr(syscalls.Clone), unix.CLONE_NEWNET|sigchld)
	fmt.Fprintf(&b, "fd = os.open('/proc/self/ns/user', os.O_RDONLY)\ncall('setns(own_user_ns)', %d, L(fd), L(0))\n", byName["setns"])
	fmt.Fprintf(&b, "call('keyctl(GET_KEYRING_ID,USER)', %d, L(0), L(-4), L(1))\n", byName["keyctl"])
	fmt.Fprintf(&b, "call('add_key(user)', %d, ctypes.c_char_p(b'user'), ctypes.c_char_p(b'mcpx'), ctypes.c_char_p(b'x'), L(1), L(-2))\n", byName["add_key"])
	fmt.Fprintf(&b, "call('userfaultfd(0)', %d, L(0))\n", byName["userfaultfd"])
	fmt.Fprintf(&b, "call('perf_event_open(self)', %d, attr, L(0), L(-1), L(-1), L(0))\n", byName["perf_event_open"])
	fmt.Fprintf(&b, "call('clone3', %d, L(0), L(88))\n", nr(syscalls.Clone3))
	// The calls that would change this process's namespaces, in children.
	fmt.Fprintf(&b, `def in_child(f):
    pid = os.fork()
    if pid == 0:
        f()
        os._exit(0)
    os.waitpid(pid, 0)
in_child(lambda: call('unshare(CLONE_NEWUSER)', %d, L(%d)))
`, byName["unshare"], unix.CLONE_NEWUSER)
	b.WriteString(`got = []
ts = [threading.Thread(target=got.append, args=(i,)) for i in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print("threads", len(got), flush=True)
print("subprocess", subprocess.run(["/bin/echo", "ok"], capture_output=True, text=True).stdout.strip(), flush=True)
`)
	return b.String()
}

// TestRunDeniedKernelSyscalls: in a run, every call of the kernel rules gets EPERM
// (clone3 ENOSYS), whatever the runtime's profile; the same program outside the
// wrapper (the control) creates a user namespace and reads its keyring, so the EPERM
// is the filter's. Python's threads and subprocess still work in the run (glibc
// falls back from clone3 to clone).
func TestRunDeniedKernelSyscalls(t *testing.T) {
	code := kernelCode()
	// The control first: the backend's sweep kills any other child of the test binary.
	out, err := exec.Command(python(), "-I", "-c", code).Output()
	if err != nil {
		t.Fatalf("control outside the wrapper: %v: %s", err, out)
	}
	ctl := parseCalls(string(out))
	for _, name := range []string{"unshare(CLONE_NEWUSER)", "keyctl(GET_KEYRING_ID,USER)", "clone(CLONE_NEWUSER)"} {
		if v := ctl[name]; v != "0 0" {
			t.Errorf("control: %s outside the wrapper: got %q, want 0 0 (the host allows it; else this test proves nothing)", name, v)
		}
	}
	b := newTestBackend(t)
	s := start(t, b, code)
	<-s.conn.Done()
	got := parseCalls(s.stdout.String())
	if want := len(syscalls.Kernel) + 9; len(got) != want {
		t.Fatalf("got %d results, want %d; stdout %q stderr %q", len(got), want, s.stdout.String(), s.stderr.String())
	}
	for name, v := range got {
		want := "-1 1"
		if name == "clone3" {
			want = "-1 38"
		}
		if v != want {
			t.Errorf("%s in a run: got result/errno %s, want %s", name, v, want)
		}
	}
	if !strings.Contains(s.stdout.String(), "threads 4\n") || !strings.Contains(s.stdout.String(), "subprocess ok\n") {
		t.Errorf("threads or subprocess broken under the filter: stdout %q stderr %q", s.stdout.String(), s.stderr.String())
	}
}
