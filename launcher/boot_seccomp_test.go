package launcher

import (
	"context"
	"encoding/hex"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// seccompLocalCode prints what io_uring_setup and unshare(CLONE_NEWUSER) (in a child)
// answer, and the process's seccomp mode and filter count.
const seccompLocalCode = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *args)
    return "allowed" if r >= 0 else "errno %d" % ctypes.get_errno()
print("io_uring_setup", call(425, ctypes.c_long(1), ctypes.create_string_buffer(120)))
r, w = os.pipe()
if os.fork() == 0:
    os.write(w, call({"x86_64": 272, "aarch64": 97}[os.uname().machine], ctypes.c_long(0x10000000)).encode())
    os._exit(0)
os.wait()
os.close(w)
print("unshare", os.read(r, 64).decode())
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print("seccomp", status["Seccomp"].strip(), status.get("Seccomp_filters", "?").strip())
`

// runBootLocal runs boot.py on this machine with the given seccomp argument (the
// launcher's when filter is ""), with seccompLocalCode as the program.
func runBootLocal(t *testing.T, filter string) (frameState, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd, in, d, _, diag := frameBootstrapCommand(ctx, t, Options{}, seccompLocalCode)
	if !strings.HasPrefix(cmd.Args[len(cmd.Args)-1], "seccomp=") {
		t.Fatalf("bootCommand's last argument: got %.40q, want the seccomp filter", cmd.Args[len(cmd.Args)-1])
	}
	if filter != "" {
		cmd.Args[len(cmd.Args)-1] = filter
	}
	cmd.Stdin = strings.NewReader(in)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("running boot.py: %v (stderr %q)", err, diag.String())
		}
	}
	return frameSnapshot(d), diag.String()
}

// TestBootFilterLocal: the bootstrap, run on this machine (no container, no runtime
// profile), installs the launcher's filter before the program runs: io_uring_setup
// and unshare(CLONE_NEWUSER) get EPERM, and the program is in seccomp mode 2. The
// control, python3 without the bootstrap, gets a ring (where this host allows
// io_uring at all).
func TestBootFilterLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3")
	}
	s, diag := runBootLocal(t, "")
	if s.Exit == nil || s.Exit.Exit != 0 {
		t.Fatalf("got exit %+v, fatal %q (stderr %q), want exit 0", s.Exit, s.Fatal, diag)
	}
	for _, want := range []string{"io_uring_setup errno 1\n", "unshare errno 1\n", "seccomp 2 "} {
		if !strings.Contains(s.RawOut, want) {
			t.Errorf("program's output: got %q, want %q in it", s.RawOut, want)
		}
	}
	out, err := exec.Command("python3", "-I", "-c", seccompLocalCode).Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control, without the bootstrap: %q", out)
	if !strings.Contains(string(out), "io_uring_setup allowed") {
		t.Logf("io_uring is refused here without the bootstrap too (kernel.io_uring_disabled, or a seccomp profile around the test): the control proves less")
	}
}

// TestBootFilterFailsClosed: a bootstrap that cannot install its filter runs nothing:
// a missing, malformed or empty argument, or a program the kernel refuses, ends it
// with an F frame naming the filter (or a usage error) and no program output.
func TestBootFilterFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3")
	}
	invalid := hex.EncodeToString(syscalls.Encode([]syscalls.Instruction{{Op: 0xffff}}))
	for _, tc := range []struct{ name, arg, want string }{
		{"not hex", "seccomp=zz", "bad seccomp filter argument"},
		{"empty", "seccomp=", "bad seccomp filter argument"},
		{"not whole instructions", "seccomp=0600", "bad seccomp filter argument"},
		{"another argument", "filter=00", "bad seccomp filter argument"},
		{"refused by the kernel", "seccomp=" + invalid, "installing the seccomp filter (prctl(PR_SET_SECCOMP)) failed: errno 22"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, diag := runBootLocal(t, tc.arg)
			if s.Fatal != tc.want || s.RawOut != "" {
				t.Errorf("got fatal %q, output %q (exit %+v, stderr %q), want fatal %q and no output", s.Fatal, s.RawOut, s.Exit, diag, tc.want)
			}
		})
	}
}
