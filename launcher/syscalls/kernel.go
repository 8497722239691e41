package syscalls

import "fmt"

// Kernel are calls the engines' default seccomp profile already denies (Docker's,
// containerd's, Podman's: a container started without CAP_SYS_ADMIN), which the
// process backend denies in its per-run filter too, with EPERM: a standalone
// container's runtime profile may be missing (docker run --security-opt
// seccomp=unconfined, a pod without seccompProfile RuntimeDefault: Kubernetes'
// default is Unconfined), and then these are open to every run. Each entry works
// without any capability and reaches state or kernel code that a run must not:
//
//   - unshare, setns: a user namespace (unshare(CLONE_NEWUSER)) gives the program
//     every capability inside it, and with them mount, the new mount API (fsopen,
//     fsmount, open_tree, move_mount), pivot_root, network and the rest of the
//     kernel surface that capabilities otherwise close; that surface is where most
//     container escapes start. clone with namespace flags is checked by argument
//     (CloneNamespaceFlags) and clone3, whose flags sit in a struct a filter cannot
//     read, gets ENOSYS (CloneENOSYS), so that glibc falls back to clone.
//   - keyctl, add_key, request_key: the user keyring is shared by every process of the
//     uid on the host (uid 65532 in every container that uses it), and it survives the
//     wipe between runs: run N could leave data for run N+1, or another container.
//   - userfaultfd: stalls kernel page faults under the program's control, the classic
//     widener of kernel race windows (vm.unprivileged_userfaultfd is 1 on many hosts).
//   - perf_event_open: hardware and software counters of the own uid's processes,
//     and a long record of kernel bugs (perf_event_paranoid below 3 on most distros).
//   - bpf: unprivileged eBPF programs (socket filters) where
//     kernel.unprivileged_bpf_disabled is 0: the verifier is kernel attack surface.
//   - kcmp: compares the kernel objects of two processes of the uid (another run's,
//     the healthcheck's): a side channel between runs, with nothing to do in a program.
//   - syslog: the kernel's log, readable without CAP_SYSLOG where dmesg_restrict is 0:
//     the host's messages (addresses of kernel objects among them).
//
// What the default profile removes besides these needs a capability the container
// lacks (--cap-drop ALL: mount, reboot, kexec_load, init_module, swapon, acct,
// clock_settime, iopl, open_by_handle_at, ...) and, with no user namespace to gain
// one in, stays closed without a rule of the filter. The NUMA calls (mbind,
// set_mempolicy, move_pages) are left: libraries a program uses (OpenBLAS, hwloc)
// call them, and they reach no other process's state.
//
// Like Denied, the standalone start-up check calls each with (-1, 0, 0, 0, 0, 0) in
// a filtered child and requires EPERM: each is harmless with those arguments.
var Kernel = []Syscall{
	{"unshare", 272, 97},
	{"setns", 308, 268},
	{"keyctl", 250, 219},
	{"add_key", 248, 217},
	{"request_key", 249, 218},
	{"userfaultfd", 323, 282},
	{"perf_event_open", 298, 241},
	{"bpf", 321, 280},
	{"kcmp", 312, 272},
	{"syslog", 103, 116},
}

// Clone and Clone3 are checked by argument (clone) and answered with ENOSYS (clone3)
// by the process filter.
var (
	Clone  = Syscall{"clone", 56, 220}
	Clone3 = Syscall{"clone3", 435, 435}
)

// CloneNamespaceFlags are the flags of clone(2) that make a new namespace (NEWNS,
// NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET): the process filter denies a
// clone whose first argument has any of them, as Docker's default profile does
// (the same mask, 2114060288). CLONE_NEWTIME (0x80) overlaps clone's exit-signal
// byte and can only be asked for through clone3 and unshare, both refused whole.
const CloneNamespaceFlags = 0x7E020000

// CloneENOSYS is what clone3 returns under the process filter: ENOSYS, so that
// glibc (pthread_create, posix_spawn) falls back to clone, whose flags the filter
// can read. EPERM would be final: glibc does not fall back on it.
const CloneENOSYS = 38 // ENOSYS

// Number returns s's number on goarch (amd64 or arm64; the caller has checked
// goarch with Numbers).
func (s Syscall) Number(goarch string) uint32 {
	if goarch == "arm64" {
		return uint32(s.ARM64)
	}
	return uint32(s.AMD64)
}

// KernelNumbers returns the numbers of Kernel on goarch, or an error for an
// architecture the table does not cover.
func KernelNumbers(goarch string) ([]uint32, error) {
	if _, ok := Arches[goarch]; !ok {
		return nil, fmt.Errorf("no syscall table for GOARCH %s (supported: amd64, arm64): the per-run seccomp filter cannot be built", goarch)
	}
	out := make([]uint32, len(Kernel))
	for i, s := range Kernel {
		out[i] = s.Number(goarch)
	}
	return out, nil
}
