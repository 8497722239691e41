package process

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompCall is seccomp_data for a call with arguments, in the VM's byte order.
func seccompCall(nr, arch uint32, args ...uint64) []byte {
	b := seccompData(nr, arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[offArg(i):], uint32(a))
		binary.BigEndian.PutUint32(b[offArg(i)+4:], uint32(a>>32))
	}
	return b
}

// TestSignalGuard runs the whole per-run filter, guard spliced in, in a BPF
// interpreter: the calls by which a program could signal the server (pid 1, the
// server's pid 4242, its thread 4250, its process group 4200) are EPERM, the same
// calls aimed elsewhere pass, and what the rest of the filter denies or kills it still
// does.
func TestSignalGuard(t *testing.T) {
	const (
		eperm = unix.SECCOMP_RET_ERRNO | 1
		allow = unix.SECCOMP_RET_ALLOW
		kill  = unix.SECCOMP_RET_KILL_PROCESS
	)
	neg := func(v int32) uint64 { return uint64(uint32(v)) }
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			g := guardTable[goarch]
			audit := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[goarch]
			prog, err := filterProgram(goarch)
			if err != nil {
				t.Fatal(err)
			}
			guard, err := guardProgram(goarch, []uint32{1, 4242, uint32(neg(-4200)), 4250})
			if err != nil {
				t.Fatal(err)
			}
			full, err := spliceGuard(prog, guard)
			if err != nil {
				t.Fatal(err)
			}
			vm, err := bpf.NewVM(full)
			if err != nil {
				t.Fatalf("the interpreter refuses the filter: %v", err)
			}
			ptrace := map[string]uint32{"amd64": 101, "arm64": 117}[goarch]
			for _, c := range []struct {
				name string
				in   []byte
				want uint32
			}{
				{"kill(1, SIGABRT)", seccompCall(g.kill, audit, 1, 6), eperm},
				{"kill(1 with high bits, SIGABRT)", seccompCall(g.kill, audit, 1|1<<40, 6), eperm},
				{"kill(server, SIGTERM)", seccompCall(g.kill, audit, 4242, 15), eperm},
				{"kill(server thread, SIGTERM)", seccompCall(g.kill, audit, 4250, 15), eperm},
				{"kill(-server group, SIGTERM)", seccompCall(g.kill, audit, neg(-4200), 15), eperm},
				{"kill(own child, SIGTERM)", seccompCall(g.kill, audit, 77, 15), allow},
				{"kill(-1, SIGKILL)", seccompCall(g.kill, audit, neg(-1), 9), allow},
				{"kill(0, SIGTERM)", seccompCall(g.kill, audit, 0, 15), allow},
				{"tgkill(1, 1, SIGSEGV)", seccompCall(g.tgkill, audit, 1, 1, 11), eperm},
				{"tgkill(own, own, SIGSEGV)", seccompCall(g.tgkill, audit, 77, 77, 11), allow},
				{"rt_tgsigqueueinfo(1, ...)", seccompCall(g.tgsigqueue, audit, 1, 1, 11, 0x1000), eperm},
				{"pidfd_open(1)", seccompCall(g.pidfdOpen, audit, 1, 0), eperm},
				{"pidfd_open(own child)", seccompCall(g.pidfdOpen, audit, 77, 0), allow},
				{"tkill(any)", seccompCall(g.tkill, audit, 77, 11), eperm},
				{"rt_sigqueueinfo(any)", seccompCall(g.sigqueue, audit, 77, 11, 0x1000), eperm},
				{"pidfd_send_signal(any)", seccompCall(g.pidfdSend, audit, 3, 11, 0, 0), eperm},
				{"fcntl F_SETOWN", seccompCall(g.fcntl, audit, 3, unix.F_SETOWN, 1), eperm},
				{"fcntl F_SETSIG", seccompCall(g.fcntl, audit, 3, unix.F_SETSIG, 11), eperm},
				{"fcntl F_SETOWN_EX", seccompCall(g.fcntl, audit, 3, unix.F_SETOWN_EX, 0x1000), eperm},
				{"fcntl F_GETFL", seccompCall(g.fcntl, audit, 3, unix.F_GETFL), allow},
				{"fcntl F_SETFL", seccompCall(g.fcntl, audit, 3, unix.F_SETFL, unix.O_NONBLOCK), allow},
				{"prlimit64(1, set)", seccompCall(g.prlimit, audit, 1, 0, 0x1000, 0), eperm},
				{"prlimit64(1, set, high pointer)", seccompCall(g.prlimit, audit, 1, 0, 0x7fff00000000, 0), eperm},
				{"prlimit64(1, get)", seccompCall(g.prlimit, audit, 1, 0, 0, 0x1000), allow},
				{"prlimit64(0, set)", seccompCall(g.prlimit, audit, 0, 0, 0x1000, 0), allow},
				{"ptrace (the rest of the filter)", seccompCall(ptrace, audit), eperm},
				{"kill of a foreign arch", seccompCall(g.kill, unix.AUDIT_ARCH_I386, 1, 6), kill},
			} {
				got, err := vm.Run(c.in)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if uint32(got) != c.want {
					t.Errorf("%s: got %#x, want %#x", c.name, got, c.want)
				}
			}
		})
	}
}

// TestGuardNumbersMatchTheKernelHeaders checks the guard's table for this machine.
func TestGuardNumbersMatchTheKernelHeaders(t *testing.T) {
	g, ok := guardTable[runtime.GOARCH]
	if !ok {
		t.Skipf("no guard table for %s (the filter is not built there either)", runtime.GOARCH)
	}
	for _, c := range []struct {
		name      string
		got, want uint32
	}{
		{"kill", g.kill, unix.SYS_KILL}, {"tkill", g.tkill, unix.SYS_TKILL}, {"tgkill", g.tgkill, unix.SYS_TGKILL},
		{"rt_sigqueueinfo", g.sigqueue, unix.SYS_RT_SIGQUEUEINFO}, {"rt_tgsigqueueinfo", g.tgsigqueue, unix.SYS_RT_TGSIGQUEUEINFO},
		{"pidfd_open", g.pidfdOpen, unix.SYS_PIDFD_OPEN}, {"pidfd_send_signal", g.pidfdSend, unix.SYS_PIDFD_SEND_SIGNAL},
		{"fcntl", g.fcntl, unix.SYS_FCNTL}, {"prlimit64", g.prlimit, unix.SYS_PRLIMIT64},
	} {
		if c.got != c.want {
			t.Errorf("%s on %s: got %d, want %d", c.name, runtime.GOARCH, c.got, c.want)
		}
	}
}
