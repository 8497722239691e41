// Package syscalls is the one list of system calls mcp-exec denies to programs beyond
// what the engine's default seccomp profile denies, and the seccomp filter built from
// it (filter.go). The container backends remove these names from the profile they send
// (launcher/docker); the process backend (standalone mode) installs the filter for
// every run (launcher/process); and the bootstrap of every sandbox installs it on
// itself before any program runs (launcher/boot.py), so that a runtime whose profile
// is weaker (containerd's RuntimeDefault on Kubernetes allows io_uring) or missing
// still denies them. One table, so these cannot drift.
//
// The package uses the standard library only: launcher/process must not import the
// engine's modules, and the table must not depend on anything that could change it.
package syscalls

import "fmt"

// Errno is what a denied call returns in both sandboxes: EPERM, the default profile's
// defaultErrnoRet (the process filter returns it too, so a program sees the same
// answer under either backend).
const Errno = 1 // EPERM

// Syscall is one denied system call: its name (as seccomp profiles spell it) and its
// number on each architecture the process filter supports.
type Syscall struct {
	Name  string
	AMD64 int // x86_64 (native ABI)
	ARM64 int // aarch64
}

// Denied are removed from the engine's default profile and denied by the process
// filter. Docker before 25 allows io_uring, whose submission queue performs operations
// without passing through seccomp and which has been a steady source of kernel
// privilege escalations. The process-inspection calls go too: a program has no
// business reading or writing another process's memory, nor taking its descriptors,
// and without them the bootstrap (and in standalone mode the server) does not depend
// on being non-dumpable alone.
//
// The standalone start-up check calls every one of them with the arguments
// (-1, 0, 0, 0, 0, 0) in a filtered child and requires EPERM: an entry must be
// harmless with those arguments should the filter be missing.
var Denied = []Syscall{
	{"io_uring_setup", 425, 425},
	{"io_uring_enter", 426, 426},
	{"io_uring_register", 427, 427},
	{"ptrace", 101, 117},
	{"process_vm_readv", 310, 270},
	{"process_vm_writev", 311, 271},
	{"pidfd_getfd", 438, 438},
}

// Names returns the names of Denied, in order.
func Names() []string {
	out := make([]string, len(Denied))
	for i, s := range Denied {
		out[i] = s.Name
	}
	return out
}

// Arch is what a seccomp filter checks about the calling convention before it looks
// at a syscall number.
type Arch struct {
	// Audit is the AUDIT_ARCH_* value the kernel reports in seccomp_data.arch for a
	// native call. Any other value (i386 calls through int 0x80 on x86_64, arm32 on
	// arm64) means another ABI with other numbers: the filter kills the process.
	Audit uint32
	// ForeignBit, if not 0, marks numbers of another ABI sharing the audit value (x32
	// on x86_64: the native number with bit 30 set): the filter kills those too.
	ForeignBit uint32
}

// Arches are the architectures the process filter supports, by GOARCH.
var Arches = map[string]Arch{
	"amd64": {Audit: 0xc000003e, ForeignBit: 0x40000000}, // AUDIT_ARCH_X86_64, __X32_SYSCALL_BIT
	"arm64": {Audit: 0xc00000b7},                         // AUDIT_ARCH_AARCH64
}

// Numbers returns the architecture's description and the numbers of Denied on it, or
// an error for an architecture the table does not cover (the filter then refuses to
// run anything: fail closed).
func Numbers(goarch string) (Arch, []uint32, error) {
	a, ok := Arches[goarch]
	if !ok {
		return Arch{}, nil, fmt.Errorf("no syscall table for GOARCH %s (supported: amd64, arm64): the per-run seccomp filter cannot be built", goarch)
	}
	out := make([]uint32, len(Denied))
	for i, s := range Denied {
		n := s.AMD64
		if goarch == "arm64" {
			n = s.ARM64
		}
		out[i] = uint32(n)
	}
	return a, out, nil
}
