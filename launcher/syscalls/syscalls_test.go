package syscalls

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// unixNumbers are the numbers golang.org/x/sys/unix gives for the build's GOARCH (the
// test runs on amd64 and arm64 alike, and checks that column of the table).
var unixNumbers = map[string]int{
	"io_uring_setup":    unix.SYS_IO_URING_SETUP,
	"io_uring_enter":    unix.SYS_IO_URING_ENTER,
	"io_uring_register": unix.SYS_IO_URING_REGISTER,
	"ptrace":            unix.SYS_PTRACE,
	"process_vm_readv":  unix.SYS_PROCESS_VM_READV,
	"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
	"pidfd_getfd":       unix.SYS_PIDFD_GETFD,
}

func TestNumbersMatchTheKernelHeaders(t *testing.T) {
	a, nrs, err := Numbers(runtime.GOARCH)
	if err != nil {
		t.Fatalf("Numbers(%s): %v", runtime.GOARCH, err)
	}
	for i, s := range Denied {
		want, ok := unixNumbers[s.Name]
		if !ok {
			t.Errorf("%s: not in the test's x/sys/unix table; add it there", s.Name)
			continue
		}
		if int(nrs[i]) != want {
			t.Errorf("%s on %s: got %d, want %d (x/sys/unix)", s.Name, runtime.GOARCH, nrs[i], want)
		}
	}
	wantAudit := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if a.Audit != wantAudit {
		t.Errorf("audit arch: got %#x, want %#x", a.Audit, wantAudit)
	}
}

func TestNumbersFailClosed(t *testing.T) {
	for _, arch := range []string{"386", "arm", "riscv64", "s390x", ""} {
		if _, _, err := Numbers(arch); err == nil {
			t.Errorf("Numbers(%q): got no error, want one (no table: the filter must not be built)", arch)
		}
	}
}

func TestNamesUnique(t *testing.T) {
	n := Names()
	if len(n) != len(Denied) || !slices.Contains(n, "io_uring_setup") {
		t.Fatalf("Names: got %v", n)
	}
	s := slices.Clone(n)
	slices.Sort(s)
	if len(slices.Compact(s)) != len(n) {
		t.Errorf("Names: got duplicates in %v", n)
	}
	if Errno != int(unix.EPERM) {
		t.Errorf("Errno: got %d, want EPERM", Errno)
	}
}
