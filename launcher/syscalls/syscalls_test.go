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

// kernelUnixNumbers: the same check for Kernel, clone and clone3.
var kernelUnixNumbers = map[string]int{
	"unshare":         unix.SYS_UNSHARE,
	"setns":           unix.SYS_SETNS,
	"keyctl":          unix.SYS_KEYCTL,
	"add_key":         unix.SYS_ADD_KEY,
	"request_key":     unix.SYS_REQUEST_KEY,
	"userfaultfd":     unix.SYS_USERFAULTFD,
	"perf_event_open": unix.SYS_PERF_EVENT_OPEN,
	"bpf":             unix.SYS_BPF,
	"kcmp":            unix.SYS_KCMP,
	"syslog":          unix.SYS_SYSLOG,
	"clone":           unix.SYS_CLONE,
	"clone3":          unix.SYS_CLONE3,
}

func TestKernelNumbersMatchTheKernelHeaders(t *testing.T) {
	nrs, err := KernelNumbers(runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range append(slices.Clone(Kernel), Clone, Clone3) {
		want, ok := kernelUnixNumbers[s.Name]
		if !ok {
			t.Errorf("%s: not in the test's x/sys/unix table; add it there", s.Name)
			continue
		}
		got := int(s.Number(runtime.GOARCH))
		if i < len(nrs) && int(nrs[i]) != got {
			t.Errorf("%s: KernelNumbers %d, Number %d", s.Name, nrs[i], got)
		}
		if got != want {
			t.Errorf("%s on %s: got %d, want %d (x/sys/unix)", s.Name, runtime.GOARCH, got, want)
		}
		if slices.Contains(Names(), s.Name) {
			t.Errorf("%s is in both Denied and Kernel", s.Name)
		}
	}
	if _, err := KernelNumbers("riscv64"); err == nil {
		t.Error("KernelNumbers(riscv64): no error, want one (fail closed)")
	}
	if CloneNamespaceFlags != unix.CLONE_NEWNS|unix.CLONE_NEWCGROUP|unix.CLONE_NEWUTS|unix.CLONE_NEWIPC|unix.CLONE_NEWUSER|unix.CLONE_NEWPID|unix.CLONE_NEWNET {
		t.Errorf("CloneNamespaceFlags %#x is not the namespace flags of clone(2)", CloneNamespaceFlags)
	}
	if CloneENOSYS != int(unix.ENOSYS) {
		t.Errorf("CloneENOSYS: got %d, want ENOSYS", CloneENOSYS)
	}
}
