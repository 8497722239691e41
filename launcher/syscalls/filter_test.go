package syscalls

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// vmOf loads prog into x/net/bpf's interpreter, which reads words of its input in
// network order (as from a packet) where the kernel reads seccomp_data in native
// order: the tests' input is written big endian for it.
func vmOf(t *testing.T, prog []Instruction) *bpf.VM {
	t.Helper()
	raw := make([]bpf.RawInstruction, len(prog))
	for i, in := range prog {
		raw[i] = bpf.RawInstruction{Op: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("x/net/bpf cannot decode the filter")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("the interpreter refuses the filter: %v", err)
	}
	return vm
}

func call(t *testing.T, vm *bpf.VM, nr, arch, arg0 uint32) uint32 {
	t.Helper()
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[OffNr:], nr)
	binary.BigEndian.PutUint32(b[OffArch:], arch)
	binary.BigEndian.PutUint32(b[OffArg0:], arg0)
	v, err := vm.Run(b)
	if err != nil {
		t.Fatalf("running the filter on nr %d arch %#x: %v", nr, arch, err)
	}
	return uint32(v)
}

// TestFilter runs the bootstrap's filter (every architecture) and each one-architecture
// filter (the process backend's) in a BPF interpreter: every Denied and Kernel call
// gets EPERM on its architecture, clone3 ENOSYS, clone EPERM with a namespace flag and
// ALLOW without, ordinary calls ALLOW, and a call of any other ABI (i386, arm32, x32,
// or a supported one the filter was not built for) kills the process.
func TestFilter(t *testing.T) {
	const (
		eperm  = RetErrno | 1
		enosys = RetErrno | uint32(unix.ENOSYS)
		allow  = RetAllow
		kill   = RetKillProcess
	)
	audit := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}
	ordinary := map[string][]uint32{"amd64": {0, 1, 257, 59, 60}, "arm64": {63, 64, 56, 221, 93}} // read, write, openat, execve, exit
	thread := uint32(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID)
	for _, tc := range []struct {
		name    string
		arches  []string
		covered []string
	}{
		{"all", AllArches(), []string{"amd64", "arm64"}},
		{"amd64", []string{"amd64"}, []string{"amd64"}},
		{"arm64", []string{"arm64"}, []string{"arm64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog, err := Filter(tc.arches...)
			if err != nil {
				t.Fatal(err)
			}
			vm := vmOf(t, prog)
			for goarch, a := range audit {
				in := false
				for _, c := range tc.covered {
					in = in || c == goarch
				}
				if !in {
					if got := call(t, vm, ordinary[goarch][0], a, 0); got != kill {
						t.Errorf("%s call on a filter without %s: got %#x, want KILL_PROCESS", goarch, goarch, got)
					}
					continue
				}
				for _, s := range append(append([]Syscall{}, Denied...), Kernel...) {
					if got := call(t, vm, s.Number(goarch), a, 0); got != eperm {
						t.Errorf("%s on %s: got %#x, want ERRNO|EPERM", s.Name, goarch, got)
					}
				}
				if got := call(t, vm, Clone3.Number(goarch), a, 0); got != enosys {
					t.Errorf("clone3 on %s: got %#x, want ERRNO|ENOSYS", goarch, got)
				}
				for _, f := range []uint32{unix.CLONE_NEWUSER, unix.CLONE_NEWNS, unix.CLONE_NEWNET, unix.CLONE_NEWPID} {
					if got := call(t, vm, Clone.Number(goarch), a, f|uint32(unix.SIGCHLD)); got != eperm {
						t.Errorf("clone(%#x) on %s: got %#x, want ERRNO|EPERM", f, goarch, got)
					}
				}
				for _, f := range []uint32{thread, uint32(unix.SIGCHLD)} {
					if got := call(t, vm, Clone.Number(goarch), a, f); got != allow {
						t.Errorf("clone(%#x) on %s: got %#x, want ALLOW", f, goarch, got)
					}
				}
				for _, nr := range ordinary[goarch] {
					if got := call(t, vm, nr, a, unix.CLONE_NEWUSER); got != allow {
						t.Errorf("ordinary call %d on %s: got %#x, want ALLOW", nr, goarch, got)
					}
				}
				if goarch == "amd64" {
					if got := call(t, vm, 0|0x40000000, a, 0); got != kill {
						t.Errorf("read through x32: got %#x, want KILL_PROCESS", got)
					}
				}
			}
			for _, foreign := range []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_ARM, 0} {
				if got := call(t, vm, 0, foreign, 0); got != kill {
					t.Errorf("a call of arch %#x: got %#x, want KILL_PROCESS", foreign, got)
				}
			}
		})
	}
}

func TestFilterFailsClosed(t *testing.T) {
	for _, arches := range [][]string{nil, {"386"}, {"amd64", "riscv64"}, {""}} {
		if _, err := Filter(arches...); err == nil {
			t.Errorf("Filter(%q): got a filter, want an error (no table: fail closed)", arches)
		}
	}
}

// TestEncode: struct sock_filter, little endian, 8 bytes an instruction.
func TestEncode(t *testing.T) {
	b := Encode([]Instruction{{Op: 0x15, Jt: 1, Jf: 2, K: 0xc000003e}, {Op: 0x06, K: RetAllow}})
	want := []byte{0x15, 0, 1, 2, 0x3e, 0, 0, 0xc0, 0x06, 0, 0, 0, 0, 0, 0xff, 0x7f}
	if string(b) != string(want) {
		t.Errorf("Encode: got % x, want % x", b, want)
	}
}
