package process

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// Test-only entry points of the test binary, decided before any init function (so
// before the wrapper's): "unfiltered" runs the start-up check's probe without the
// filter (the seam for TestCheckSeccompRefusesWithoutTheFilter); the hook variable
// makes the binary, exec'd as a run's program, make an x32 call.
const (
	unfilteredArg0 = "mcp-exec-test-unfiltered-seccomp"
	hookEnv        = "MCP_EXEC_PROCESS_TEST_HOOK"
)

var _ = testEntry()

func testEntry() bool {
	if len(os.Args) > 0 && os.Args[0] == unfilteredArg0 {
		os.Exit(seccompProbe())
	}
	if os.Getenv(hookEnv) == "x32" && len(os.Args) > 0 && os.Args[0] != wrapperArg0 {
		// getpid through the x32 ABI: the native number with bit 30 set.
		_, _, e := unix.RawSyscall(unix.SYS_GETPID|0x40000000, 0, 0, 0)
		fmt.Printf("x32 %d\n", int(e))
		os.Exit(0)
	}
	return true
}

// seccompData is struct seccomp_data as the x/net/bpf VM reads it: the VM loads
// words in network order (as from a packet), the kernel in native order; the values
// are what matter.
func seccompData(nr, arch uint32) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], arch)
	return b
}

// TestFilterProgram runs the filter for each supported architecture in a BPF
// interpreter: every denied number gets EPERM, ordinary calls pass, and a call of a
// foreign ABI (i386 or arm32 audit value, x32 numbers) kills the process.
func TestFilterProgram(t *testing.T) {
	const (
		eperm = unix.SECCOMP_RET_ERRNO | 1
		allow = unix.SECCOMP_RET_ALLOW
		kill  = unix.SECCOMP_RET_KILL_PROCESS
	)
	for _, tc := range []struct {
		goarch          string
		native, foreign uint32
		ordinary        []uint32 // read, write, openat, execve, clone
		x32             bool
	}{
		{"amd64", unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_I386, []uint32{0, 1, 257, 59, 56}, true},
		{"arm64", unix.AUDIT_ARCH_AARCH64, unix.AUDIT_ARCH_ARM, []uint32{63, 64, 56, 221, 220}, false},
	} {
		t.Run(tc.goarch, func(t *testing.T) {
			prog, err := filterProgram(tc.goarch)
			if err != nil {
				t.Fatal(err)
			}
			vm, err := bpf.NewVM(prog)
			if err != nil {
				t.Fatalf("the interpreter refuses the filter: %v", err)
			}
			run := func(nr, arch uint32) uint32 {
				t.Helper()
				v, err := vm.Run(seccompData(nr, arch))
				if err != nil {
					t.Fatalf("running the filter on nr %d arch %#x: %v", nr, arch, err)
				}
				return uint32(v)
			}
			_, nrs, _ := syscalls.Numbers(tc.goarch)
			for i, nr := range nrs {
				if got := run(nr, tc.native); got != eperm {
					t.Errorf("%s (%d): got %#x, want ERRNO|EPERM %#x", syscalls.Denied[i].Name, nr, got, uint32(eperm))
				}
				if got := run(nr, tc.foreign); got != kill {
					t.Errorf("%s on the foreign arch %#x: got %#x, want KILL_PROCESS", syscalls.Denied[i].Name, tc.foreign, got)
				}
				if tc.x32 {
					if got := run(nr|0x40000000, tc.native); got != kill {
						t.Errorf("%s through x32: got %#x, want KILL_PROCESS", syscalls.Denied[i].Name, got)
					}
				}
			}
			for _, nr := range tc.ordinary {
				if got := run(nr, tc.native); got != allow {
					t.Errorf("ordinary call %d: got %#x, want ALLOW", nr, got)
				}
				if got := run(nr, tc.foreign); got != kill {
					t.Errorf("ordinary call %d on the foreign arch: got %#x, want KILL_PROCESS", nr, got)
				}
			}
		})
	}
	for _, arch := range []string{"386", "arm", "riscv64"} {
		if _, err := filterProgram(arch); err == nil {
			t.Errorf("filterProgram(%s): got a filter, want an error (no table: fail closed)", arch)
		}
	}
}

// uringCode calls io_uring_setup(1, params) and each denied call with (-1, 0, ...)
// through ctypes and prints "NAME RESULT ERRNO" per call.
func uringCode() string {
	_, nrs, _ := syscalls.Numbers(runtime.GOARCH)
	var b strings.Builder
	b.WriteString(`import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(nr), *args)
    print("call", name, r, ctypes.get_errno(), flush=True)
    if r >= 0 and name == "io_uring_setup":
        os.close(r)
params = ctypes.create_string_buffer(120)
`)
	fmt.Fprintf(&b, "call(%q, %d, L(1), params)\n", "io_uring_setup(1,params)", nrs[0])
	for i, s := range syscalls.Denied {
		fmt.Fprintf(&b, "call(%q, %d, L(-1), L(0), L(0), L(0), L(0), L(0))\n", s.Name, nrs[i])
	}
	return b.String()
}

func parseCalls(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "call" {
			m[f[1]] = f[2] + " " + f[3]
		}
	}
	return m
}

// TestRunDeniedDangerousSyscalls: a run's Python calling io_uring_setup (and every
// other denied call) through ctypes gets EPERM, whatever the host's own seccomp state;
// the same program outside the wrapper (the control) gets a ring and process_vm_readv
// goes through, so the EPERM is the filter's.
func TestRunDeniedDangerousSyscalls(t *testing.T) {
	// The control first: the backend's sweep kills any other child of the test binary.
	code := uringCode()
	out, err := exec.Command(python(), "-I", "-c", code).Output()
	if err != nil {
		t.Fatalf("control outside the wrapper: %v", err)
	}
	ctl := parseCalls(string(out))
	if v := ctl["process_vm_readv"]; v != "0 0" {
		t.Errorf("control: process_vm_readv(-1, NULL, 0, ...) outside the wrapper: got %s, want 0 0", v)
	}
	if b, _ := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); strings.TrimSpace(string(b)) != "2" {
		if v := ctl["io_uring_setup(1,params)"]; strings.HasPrefix(v, "-1 ") {
			t.Errorf("control: io_uring_setup outside the wrapper: got %s, want a ring (the host allows io_uring)", v)
		}
	}
	b := newTestBackend(t)
	s := start(t, b, code)
	<-s.conn.Done()
	got := parseCalls(s.stdout.String())
	if len(got) != len(syscalls.Denied)+1 {
		t.Fatalf("got %d results, want %d; stdout %q stderr %q", len(got), len(syscalls.Denied)+1, s.stdout.String(), s.stderr.String())
	}
	for name, v := range got {
		if v != "-1 1" {
			t.Errorf("%s in a run: got result/errno %s, want -1 1 (EPERM)", name, v)
		}
	}
}

// TestRunForeignABIKilled: a run's program that makes an x32 call (getpid with bit 30
// set) is killed with SIGSYS by the filter; outside the wrapper the same binary gets
// an answer from the kernel (ENOSYS where x32 is off).
func TestRunForeignABIKilled(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x32 exists on amd64 only")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The control first: the backend's sweep kills any other child of the test binary.
	cmd := exec.Command(self)
	cmd.Env = []string{hookEnv + "=x32"}
	ctl, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(ctl), "x32 ") {
		t.Errorf("control outside the wrapper: got %q, %v, want an x32 line (the kernel answered)", ctl, err)
	}
	b := newTestBackend(t)
	sp := backend.Spec{Command: []string{self}, Env: append([]string{hookEnv + "=x32"}, testEnv...), WorkDir: "/tmp", Memory: 512 << 20, TmpfsSize: 64 << 20}
	id, err := b.Create(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	out, errb := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	conn, err := b.Start(t.Context(), id, out, errb)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.CloseWrite()
	<-conn.Done()
	ex, err := b.Inspect(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if want := 128 + int(unix.SIGSYS); ex.Code != want || strings.Contains(out.String(), "x32 ") {
		t.Errorf("x32 call in a run: got exit %d, stdout %q, stderr %q; want killed by SIGSYS (%d) before it prints", ex.Code, out.String(), errb.String(), want)
	}
}

// TestCheckSeccomp: the start-up check's child, started as a run's wrapper is, sees
// EPERM from every denied call.
func TestCheckSeccomp(t *testing.T) {
	seen, err := checkSeccomp(t.Context(), "")
	if err != nil {
		t.Fatalf("checkSeccomp: %v (saw %v)", err, seen)
	}
	kernel, _ := kernelProbeCalls(runtime.GOARCH)
	if len(seen) != len(syscalls.Denied)+len(kernel) {
		t.Fatalf("checkSeccomp saw %v, want one result per denied syscall and kernel rule", seen)
	}
	for _, s := range seen {
		if want := "=EPERM"; !strings.HasSuffix(s, want) && s != "clone3=ENOSYS" {
			t.Errorf("checkSeccomp: %s, want EPERM (clone3: ENOSYS)", s)
		}
	}
}

// TestCheckSeccompRefusesWithoutTheFilter: the same probe without the filter (the
// test-only seam) makes the check, and so Lockdown.Check, name the missing lock.
func TestCheckSeccompRefusesWithoutTheFilter(t *testing.T) {
	seen, err := checkSeccomp(t.Context(), unfilteredArg0)
	if err == nil || !strings.Contains(err.Error(), "process_vm_readv allowed") {
		t.Fatalf("checkSeccomp without the filter: got %v (saw %v), want a refusal naming process_vm_readv allowed", err, seen)
	}
	_, err = Lockdown{seccompArg0: unfilteredArg0}.Check(t.Context())
	var found bool
	for _, e := range joined(err) {
		var le *LockError
		if errors.As(e, &le) && le.Lock == "seccomp filter per run" {
			found = true
		}
	}
	if !found {
		t.Fatalf("Lockdown.Check without the filter: got %v, want the lock \"seccomp filter per run\" missing", err)
	}
	// And with the filter, that lock is not among what Check reports (the host lacks others).
	_, err = Lockdown{}.Check(t.Context())
	if err != nil && strings.Contains(err.Error(), "seccomp filter per run") {
		t.Fatalf("Lockdown.Check with the filter: got %v", err)
	}
}

func joined(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		return u.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
