package launchertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// DeniedCallsProgram is a program that makes the calls the bootstrap's seccomp filter
// (launcher/syscalls) must refuse whatever the runtime's profile allows, each with
// arguments that would work without the filter where the kernel lets an unprivileged
// process (io_uring_setup gets a ring, unshare a user namespace, keyctl the user
// keyring, ...), and the ones that would change the process in a child of its own.
// It prints "call NAME RESULT ERRNO" per call (RESULT 0 when it went through), then
// "threads N" and "subprocess ok": threads and processes still start under the filter
// (glibc falls back from clone3 to clone).
func DeniedCallsProgram() string {
	nr := func(name string) string {
		all := append(append([]syscalls.Syscall{}, syscalls.Denied...), syscalls.Kernel...)
		for _, s := range append(all, syscalls.Clone, syscalls.Clone3) {
			if s.Name == name {
				return fmt.Sprintf("{'x86_64': %d, 'aarch64': %d}[M]", s.AMD64, s.ARM64)
			}
		}
		panic("no syscall " + name)
	}
	var b strings.Builder
	b.WriteString(`import ctypes, os, platform, subprocess, threading
M = platform.machine()
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L, S = ctypes.c_long, ctypes.c_char_p
NULL = ctypes.c_void_p(0)
def call(name, nr, *args, child=False):
    r, w = os.pipe()
    pid = os.fork() if child else 0
    if pid == 0:
        ctypes.set_errno(0)
        res = libc.syscall(L(nr), *args)
        e = ctypes.get_errno()
        if name.startswith("clone(") and res == 0:
            os._exit(0)
        if name.startswith("io_uring_setup") and res >= 0:
            os.close(res)
        os.write(w, b"%d %d" % (0 if res >= 0 else -1, e))
        if child:
            os._exit(0)
    if child:
        os.waitpid(pid, 0)
    os.close(w)
    print("call", name, os.read(r, 64).decode(), flush=True)
    os.close(r)
params = ctypes.create_string_buffer(120)
attr = ctypes.create_string_buffer(128)  # perf_event_attr: type SOFTWARE, size, config CPU_CLOCK
attr[0] = 1
attr[4] = 112
me = os.getpid()
`)
	for _, c := range []struct{ name, sys, args string }{
		{"io_uring_setup", "io_uring_setup", "L(1), params"},
		{"io_uring_enter", "io_uring_enter", "L(-1), L(0), L(0), L(0), NULL, L(0)"},
		{"io_uring_register", "io_uring_register", "L(-1), L(0), NULL, L(0)"},
		{"ptrace(TRACEME)", "ptrace", "L(0), L(0), L(0), L(0), child=True"},
		{"process_vm_readv(self)", "process_vm_readv", "L(me), NULL, L(0), NULL, L(0), L(0)"},
		{"process_vm_writev(self)", "process_vm_writev", "L(me), NULL, L(0), NULL, L(0), L(0)"},
		{"pidfd_getfd", "pidfd_getfd", "L(-1), L(0), L(0)"},
		{"unshare(CLONE_NEWUSER)", "unshare", "L(0x10000000), child=True"},
		{"clone(CLONE_NEWUSER)", "clone", "L(0x10000000 | 17), L(0), L(0), L(0), L(0), child=True"},
		{"clone3", "clone3", "NULL, L(0)"},
		{"setns", "setns", "L(-1), L(0)"},
		{"keyctl(GET_KEYRING_ID,USER)", "keyctl", "L(0), L(-4), L(1)"},
		{"add_key(user)", "add_key", "S(b'user'), S(b'mcpx'), S(b'x'), L(1), L(-2), child=True"},
		{"request_key(user)", "request_key", "S(b'user'), S(b'mcpx'), NULL, L(0)"},
		{"bpf(MAP_CREATE)", "bpf", "L(0), NULL, L(0)"},
		{"userfaultfd(USER_MODE_ONLY)", "userfaultfd", "L(os.O_CLOEXEC | os.O_NONBLOCK | 1)"},
		{"perf_event_open(self)", "perf_event_open", "attr, L(0), L(-1), L(-1), L(0)"},
		{"kcmp(self)", "kcmp", "L(me), L(me), L(0), L(0), L(0)"},
		{"syslog(SIZE_BUFFER)", "syslog", "L(10), NULL, L(0)"},
	} {
		fmt.Fprintf(&b, "call(%q, %s, %s)\n", c.name, nr(c.sys), c.args)
	}
	b.WriteString(`got = []
ts = [threading.Thread(target=got.append, args=(i,)) for i in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print("threads", len(got), flush=True)
print("subprocess", subprocess.run(["/bin/echo", "ok"], capture_output=True, text=True).stdout.strip(), flush=True)
`)
	return b.String()
}

// RunDeniedCalls runs DeniedCallsProgram in l and returns what each call got
// (deniedCalls); t fails when the program failed or its threads and subprocess did not
// start.
func RunDeniedCalls(t *testing.T, l *launcher.Launcher) map[string]string {
	t.Helper()
	res, err := l.Run(t.Context(), launcher.Job{Code: DeniedCallsProgram(), Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	calls, started := deniedCalls(res.Stdout)
	if res.ExitCode != 0 || !started {
		t.Errorf("program: exit %d, threads and subprocess started %v, want 0 and true (stdout %q, stderr %q)", res.ExitCode, started, res.Stdout, res.Stderr)
	}
	return calls
}

// deniedCalls parses DeniedCallsProgram's output: what each call got, "allowed" or
// the errno's name ("EPERM", "ENOSYS", or the number when unnamed), and whether
// threads and a subprocess still started.
func deniedCalls(out string) (calls map[string]string, threadsOK bool) {
	calls = map[string]string{}
	names := map[string]string{"1": "EPERM", "38": "ENOSYS"}
	var threads, sub bool
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 4 && f[0] == "call" && f[2] == "0":
			calls[f[1]] = "allowed"
		case len(f) == 4 && f[0] == "call":
			calls[f[1]] = names[f[3]]
			if calls[f[1]] == "" {
				calls[f[1]] = "errno " + f[3]
			}
		case l == "threads 4":
			threads = true
		case l == "subprocess ok":
			sub = true
		}
	}
	return calls, threads && sub
}

// DeniedCallsWant is what RunDeniedCalls must find under the filter: EPERM for every
// call, ENOSYS for clone3 (so that glibc falls back to clone). It returns the
// differences, one per call, empty when there are none.
func DeniedCallsWant(calls map[string]string) []string {
	var bad []string
	for _, name := range deniedCallNames {
		want := "EPERM"
		if name == "clone3" {
			want = "ENOSYS"
		}
		if got := calls[name]; got != want {
			bad = append(bad, fmt.Sprintf("%s: got %q, want %s", name, got, want))
		}
	}
	return bad
}

var deniedCallNames = []string{
	"io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace(TRACEME)",
	"process_vm_readv(self)", "process_vm_writev(self)", "pidfd_getfd",
	"unshare(CLONE_NEWUSER)", "clone(CLONE_NEWUSER)", "clone3", "setns",
	"keyctl(GET_KEYRING_ID,USER)", "add_key(user)", "request_key(user)", "bpf(MAP_CREATE)",
	"userfaultfd(USER_MODE_ONLY)", "perf_event_open(self)", "kcmp(self)", "syslog(SIZE_BUFFER)",
}

// WithoutBootFilter wraps be so that the sandboxes it creates run a bootstrap that
// does not install its seccomp filter (boot.py's install_filter calls removed from the
// command): the control of the tests that prove what the filter denies, and of the
// start-up check that must notice it missing. Tests only.
func WithoutBootFilter(be launcher.Backend) launcher.Backend {
	return noFilter{be}
}

type noFilter struct{ launcher.Backend }

// SeccompHint is the wrapped backend's (launcher.SeccompHinter), for the refusal the
// control expects.
func (b noFilter) SeccompHint() *backend.SettingError {
	if h, ok := b.Backend.(launcher.SeccompHinter); ok {
		return h.SeccompHint()
	}
	return nil
}

func (b noFilter) Create(ctx context.Context, spec backend.Spec) (string, error) {
	const call = "    install_filter(filter_arg)\n"
	spec.Command = append([]string(nil), spec.Command...)
	removed := 0
	for i, a := range spec.Command {
		if n := strings.Count(a, call); n > 0 {
			spec.Command[i] = strings.ReplaceAll(a, call, "")
			removed += n
		}
	}
	if removed != 2 { // parent() and session()
		return "", fmt.Errorf("WithoutBootFilter: found %d calls of install_filter in the bootstrap, want 2", removed)
	}
	return b.Backend.Create(ctx, spec)
}

// Unconfined is the Docker/Podman backend on cli, except that it creates sandboxes
// with the engine's seccomp profile off (seccomp=unconfined) instead of the launcher's:
// a runtime whose profile denies less than the launcher's, so that what is still
// denied is the bootstrap's filter's doing. Tests only.
func Unconfined(cli docker.Client, be *docker.Backend) launcher.Backend {
	return unconfined{be, cli}
}

type unconfined struct {
	*docker.Backend
	cli docker.Client
}

func (b unconfined) Create(ctx context.Context, spec backend.Spec) (string, error) {
	cfg, host := docker.ContainerSpec(spec, "unconfined")
	if name, err := b.Name(ctx); err == nil && strings.Contains(name, "Podman") {
		// As docker.Backend.Create does (withoutCore): Podman raises nofile and nproc
		// to its own when a request names only the core limit.
		var keep []*container.Ulimit
		for _, u := range host.Ulimits {
			if u.Name != "core" {
				keep = append(keep, u)
			}
		}
		host.Ulimits = keep
	}
	created, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		return "", err
	}
	return created.ID, nil
}
