package process

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// The probe of the filter's kernel rules (launcher/syscalls.Kernel, namespaces by
// clone flags, clone3): what the runtime's default profile denies, denied by the run's
// own filter too, since the container's runtime may run it unconfined. The start-up
// check also refuses a server without a runtime filter (lockdown.go, "runtime seccomp
// profile"); the rules hold even where that lock is wrong about what the runtime's
// filter denies.

// offArg0 is the offset of the low 32 bits of seccomp_data.args[0], for the tests'
// interpreter.
const offArg0 = syscalls.OffArg0

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
