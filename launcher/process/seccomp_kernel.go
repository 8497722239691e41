package process

import (
	"fmt"
	"strconv"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// The per-run filter's second block: what the runtime's default profile denies
// (launcher/syscalls.Kernel, namespaces by clone flags, clone3), denied by the run's
// own filter too, since the container's runtime may run it unconfined (issue 20,
// item 5). The start-up check also refuses a server without a runtime filter
// (lockdown.go, "runtime seccomp profile"); this block holds even where that lock
// is wrong about what the runtime's filter denies.

// offArg0 is the offset of the low 32 bits of seccomp_data.args[0] (after nr, arch
// and the 8-byte instruction pointer; amd64 and arm64 are little endian).
const offArg0 = 16

// kernelRules is a self-contained piece of the filter: it expects the syscall
// number in the accumulator and, for any call it does not decide, falls through to
// the instruction after it with the number in the accumulator again.
//
//	clone3                          -> errno ENOSYS (glibc falls back to clone)
//	nr is one of Kernel             -> errno EPERM
//	clone with a CLONE_NEW* flag    -> errno EPERM
//	otherwise                       -> next instruction
func kernelRules(goarch string) ([]bpf.Instruction, error) {
	nrs, err := syscalls.KernelNumbers(goarch)
	if err != nil {
		return nil, err
	}
	k := len(nrs)
	eperm, enosys, end := k+6, k+7, k+8
	skip := func(from, to int) uint8 { return uint8(to - from - 1) }
	prog := []bpf.Instruction{
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: syscalls.Clone3.Number(goarch), SkipTrue: skip(0, enosys)},
	}
	for _, nr := range nrs {
		i := len(prog)
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: skip(i, eperm)})
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: syscalls.Clone.Number(goarch), SkipFalse: skip(k+1, end)},
		bpf.LoadAbsolute{Off: offArg0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: syscalls.CloneNamespaceFlags, SkipTrue: skip(k+3, eperm)},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.Jump{Skip: uint32(skip(k+5, end))},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(syscalls.Errno)},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(syscalls.CloneENOSYS)},
	)
	if len(prog) != end {
		return nil, fmt.Errorf("building the seccomp filter's kernel rules: layout is off (%d instructions)", len(prog))
	}
	return prog, nil
}

// kernelProbeCalls are what the start-up check's child calls besides Denied, with
// the errno each must get under the filter: every Kernel entry with (-1, 0, ...);
// clone with CLONE_NEWUSER|CLONE_NEWNS|CLONE_FS (the kernel refuses NEWNS with FS,
// EINVAL, should the filter be missing: no child is made); clone3 with a NULL
// struct (EFAULT or EINVAL without the filter).
type probeCall struct {
	name string
	nr   uint32
	args [6]uintptr
	want int
}

func kernelProbeCalls(goarch string) ([]probeCall, error) {
	nrs, err := syscalls.KernelNumbers(goarch)
	if err != nil {
		return nil, err
	}
	var out []probeCall
	for i, s := range syscalls.Kernel {
		out = append(out, probeCall{s.Name, nrs[i], [6]uintptr{^uintptr(0)}, syscalls.Errno})
	}
	out = append(out,
		probeCall{"clone(CLONE_NEWUSER)", syscalls.Clone.Number(goarch), [6]uintptr{unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_FS}, syscalls.Errno},
		probeCall{"clone3", syscalls.Clone3.Number(goarch), [6]uintptr{0, 88}, syscalls.CloneENOSYS},
	)
	return out, nil
}

// wantErrno is the errno the start-up check requires of the probe's line name.
func wantErrno(name string) string {
	if name == "clone3" {
		return strconv.Itoa(syscalls.CloneENOSYS)
	}
	return strconv.Itoa(syscalls.Errno)
}

// kernelProbe makes kernelProbeCalls and prints "NAME ERRNO" for each, as
// seccompProbe does for Denied.
func kernelProbe(goarch string) error {
	calls, err := kernelProbeCalls(goarch)
	if err != nil {
		return err
	}
	for _, c := range calls {
		_, _, e := unix.Syscall6(uintptr(c.nr), c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
		fmt.Printf("%s %d\n", c.name, int(e))
	}
	return nil
}
