package e2e_test

// Issue 20's attacks on the standalone mode, each run against the image started with
// docs/standalone.md's docker run line (saLocked): a program must not end the server by any
// signal, and must not reach the next caller's sandbox, however it forks.

import (
	"strings"
	"testing"
)

// saSignalAttack sends the server every signal by every call a program has: kill,
// tkill and tgkill of every signal to PID 1 and to every thread of it, SIGSEGV with
// a chosen si_code (rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_send_signal through a
// pidfd and through /proc/1), SIGSEGV as the SIGIO of a pipe owned by PID 1 (fcntl
// F_SETOWN + F_SETSIG), an RLIMIT_CPU of 1 s on the server (prlimit64), SIGTERM and
// SIGINT last. It prints one line per call: the set of outcomes ("sent" when the
// call went through).
const saSignalAttack = `
import ctypes, errno, fcntl, os, signal, struct, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *a):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return 0 if r >= 0 else ctypes.get_errno()
res = {}
def note(k, e):
    res.setdefault(k, set()).add(errno.errorcode.get(e, str(e)) if e else "sent")
def attempt(k, f):
    try:
        f()
        note(k, 0)
    except OSError as e:
        note(k, e.errno)
tids = sorted(int(t) for t in os.listdir("/proc/1/task"))
print("tids", len(tids), flush=True)
def everything(sigs):
    for sig in sigs:
        for t in [1] + tids:
            attempt("kill", lambda: os.kill(t, sig))
            note("tkill", sc(200, t, sig))
            note("tgkill", sc(234, 1, t, sig))
everything([s for s in range(1, 65) if s not in (signal.SIGTERM, signal.SIGINT)])
info = ctypes.create_string_buffer(struct.pack("iii", signal.SIGSEGV, 0, -1) + bytes(116))  # si_code SI_QUEUE
for t in [1] + tids:
    note("rt_sigqueueinfo", sc(129, t, signal.SIGSEGV, ctypes.addressof(info)))
    note("rt_tgsigqueueinfo", sc(297, 1, t, signal.SIGSEGV, ctypes.addressof(info)))
def pidfd():
    fd = sc(434, 1, 0)
    return fd
e = sc(434, 1, 0)
note("pidfd_open", e)
procfd = os.open("/proc/1", os.O_RDONLY | os.O_DIRECTORY)
note("pidfd_send_signal", sc(424, procfd, signal.SIGSEGV, ctypes.addressof(info), 0))
note("pidfd_send_signal", sc(424, procfd, signal.SIGABRT, 0, 0))
r, w = os.pipe()
attempt("fcntl_setsig", lambda: fcntl.fcntl(r, 10, signal.SIGSEGV))  # F_SETSIG
attempt("fcntl_setown", lambda: fcntl.fcntl(r, 8, 1))  # F_SETOWN
attempt("fcntl_setown", lambda: fcntl.fcntl(r, 8, tids[-1]))
fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
os.write(w, b"x")
lim = ctypes.create_string_buffer(struct.pack("QQ", 1, 1))
note("prlimit64", sc(302, 1, 0, ctypes.addressof(lim), 0))  # RLIMIT_CPU
time.sleep(0.5)
everything([signal.SIGTERM, signal.SIGINT])
time.sleep(0.5)
for k in sorted(res):
    print(k, " ".join(sorted(res[k])))
print("done")
`

// TestStandaloneSignalsCannotEndServer. A program throws every
// signal at the server by every call it has; each is refused (EPERM) or dropped, the
// program itself runs to its end, and the server answers the next call. Before the
// fix the first SIGILL (or SIGABRT) ended the server with a stack dump.
func TestStandaloneSignalsCannotEndServer(t *testing.T) {
	s := saSession(t, saImage(t))
	r := saExec(t, s, saSignalAttack, 60)
	t.Logf("attack run: exit %d\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	saLine(t, r, "done")
	if r.ExitCode != 0 {
		t.Errorf("the attacking run: exit %d, want 0 (no signal reached the server, so it did not kill the run)", r.ExitCode)
	}
	for _, k := range []string{"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal", "fcntl_setsig", "fcntl_setown", "prlimit64"} {
		if got := saLine(t, r, k+" "); got != "EPERM" {
			t.Errorf("%s to the server: got %s, want EPERM only", k, got)
		}
	}
	if got := saExec(t, s, "print(6*7)", 0); got.Stdout != "42\n" {
		t.Fatalf("after the attack: got %+v, want 42", got)
	}
}

// TestStandaloneRefusesPoolAndConcurrency. With a warm pool or more
// than one run at a time, one caller's program could open the next caller's stdin;
// the process backend refuses to start, saying why. Before, it started.
func TestStandaloneRefusesPoolAndConcurrency(t *testing.T) {
	img := saImage(t)
	for _, tc := range []struct {
		env  []string
		want []string
	}{
		{[]string{"MCP_EXEC_POOL_SIZE=2", "MCP_EXEC_MAX_CONCURRENT=2"}, []string{"--pool-size (MCP_EXEC_POOL_SIZE) is 2: a warm sandbox", "--max-concurrent (MCP_EXEC_MAX_CONCURRENT) is 2: concurrent runs share one user"}},
		{[]string{"MCP_EXEC_POOL_SIZE=1"}, []string{"--pool-size (MCP_EXEC_POOL_SIZE) is 1"}},
	} {
		code, stderr, err := saRun(t, img, saLocked, tc.env)
		if code != 1 || strings.Contains(stderr, "backend ready") {
			t.Errorf("%v: got exit %d (%v), want a refusal (exit 1) before the backend is ready:\n%s", tc.env, code, err, stderr)
		}
		for _, w := range append(tc.want, "refusing to start the process backend (standalone mode)") {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: the refusal lacks %q:\n%s", tc.env, w, stderr)
			}
		}
	}
}

// saOutrun leaves behind, in a new session, four guardians that ignore SIGCHLD and loop
// kill(-1, SIGCONT) while forking, each going on as its own child, so with a new pid
// every turn (two such outran
// the tree kill, which stopped a pid once and gave up after 1000 rounds before its
// SIGKILL), and an injector that opens fd 0 of every new process it finds (the next
// sandbox's bootstrap, waiting for its code) for writing and queues a code header and
// program of its own there (item 2: the HIJACKED attack), continuing everything too.
const saOutrun = `
import os, signal, sys, time
def guardian():
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        try:
            os.kill(-1, signal.SIGCONT)
        except OSError:
            pass
        try:
            if os.fork() != 0:
                os._exit(0)  # the child carries on: a new pid every turn
        except OSError:
            time.sleep(0.001)
def injector():
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    # Run as soon as it is read, it waits for the real call and prints it.
    payload = b"import os\nprint('HIJACKED; the real call was:', os.read(0, 4096))\n"
    frame = b"MCPEXEC2 %d 0\n" % len(payload) + payload
    seen, held = set(), []
    while True:
        try:
            os.kill(-1, signal.SIGCONT)
        except OSError:
            pass
        for p in os.listdir("/proc"):
            if not p.isdigit() or p in seen:
                continue
            try:
                fd = os.open("/proc/%s/fd/0" % p, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            seen.add(p)
            try:
                os.write(fd, frame)
                held.append(fd)
            except OSError:
                os.close(fd)
if os.fork() == 0:
    os.setsid()
    for f in (guardian, guardian, guardian, guardian, injector):
        if os.fork() == 0:
            for fd in (0, 1, 2):
                os.close(fd)
            f()
    os._exit(0)
os.wait()
time.sleep(0.5)
print("left behind", flush=True)
`

// TestStandaloneOutrunAndHijack, with the pool size and
// concurrency the process backend allows (0 and 1, the defaults). A run leaves the
// guardians and the injector of saOutrun behind (twice); none survives the call, the next
// caller's code runs as sent (nothing injected, nothing read from its stdin), and the
// call after sees no process but the server, its bootstrap and itself. Before the
// fix the survivors outlived the call and the next caller got HIJACKED.
func TestStandaloneOutrunAndHijack(t *testing.T) {
	s := saSession(t, saImage(t))
	for round := 1; round <= 2; round++ {
		first := saExec(t, s, saOutrun, 20)
		saLine(t, first, "left behind")
		for i := 0; i < 3; i++ {
			second := saExec(t, s, `print("B: secret data 12345")`, 20)
			if second.Stdout != "B: secret data 12345\n" || second.ExitCode != 0 {
				t.Fatalf("attack %d, call %d after it: got %+v, want the caller's own output", round, i+1, second)
			}
		}
	}
	third := saExec(t, s, `
import os
print("procs", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), os.getpid(), os.getppid())
`, 0)
	f := strings.Fields(strings.NewReplacer("[", "", "]", "", ",", "").Replace(saLine(t, third, "procs ")))
	if len(f) != 5 || f[0] != "1" {
		t.Errorf("processes seen after the attack: got %v, want only 1 (the server), its bootstrap and itself", f)
	}
}
