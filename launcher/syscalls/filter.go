package syscalls

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The seccomp filter that denies Denied and Kernel, assembled here so that both of its
// users install the same program: the process backend's per-run wrapper (with its
// signal guard spliced in, launcher/process) and the bootstrap of every container and
// pod (launcher/boot.py), for runtimes whose own profile may be weaker (containerd's
// RuntimeDefault allows io_uring; a container may run unconfined). A filter is
// inherited by every thread and child and survives execve; none can be removed, and
// where several are installed the kernel takes the answer of highest precedence (kill
// over errno over allow), so a second one (the bootstrap's under the process backend's)
// only adds.

// Instruction is one classic BPF instruction as the kernel reads it (struct
// sock_filter).
type Instruction struct {
	Op     uint16
	Jt, Jf uint8
	K      uint32
}

// The opcodes the filter uses (linux/bpf_common.h).
const (
	opLoadAbs = 0x20 // BPF_LD | BPF_W | BPF_ABS: A = 32 bits of seccomp_data at K
	opJumpEq  = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	opJumpSet = 0x45 // BPF_JMP | BPF_JSET | BPF_K: A & K != 0
	opJump    = 0x05 // BPF_JMP | BPF_JA: skip K
	opRet     = 0x06 // BPF_RET | BPF_K
)

// The filter's answers (linux/seccomp.h).
const (
	RetAllow       = 0x7fff0000 // SECCOMP_RET_ALLOW
	RetErrno       = 0x00050000 // SECCOMP_RET_ERRNO, or'ed with the errno
	RetKillProcess = 0x80000000 // SECCOMP_RET_KILL_PROCESS
)

// Offsets in struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer;
// __u64 args[6]. OffArg0 is the low 32 bits of args[0] (amd64 and arm64 are little
// endian).
const (
	OffNr   = 0
	OffArch = 4
	OffArg0 = 16
)

func load(off uint32) Instruction { return Instruction{Op: opLoadAbs, K: off} }
func ret(v uint32) Instruction    { return Instruction{Op: opRet, K: v} }
func jumpEq(v uint32, jt, jf int) Instruction {
	return Instruction{Op: opJumpEq, Jt: uint8(jt), Jf: uint8(jf), K: v}
}
func jumpSet(v uint32, jt, jf int) Instruction {
	return Instruction{Op: opJumpSet, Jt: uint8(jt), Jf: uint8(jf), K: v}
}

// skip is the offset of a jump at index from to index to.
func skip(from, to int) int { return to - from - 1 }

// Filter is the program for the architectures goarches (at least one; Arches has
// their values): a block per architecture, each entered when the call's audit arch is
// its own, and a call of any other ABI is killed:
//
//	arch is none of goarches  -> kill the process (i386 or arm32 calls: other numbers)
//	nr has the foreign bit    -> kill the process (x32 on x86_64)
//	nr is one of Denied       -> errno EPERM
//	kernelRules               -> what the runtime's default profile denies
//	otherwise                 -> allow (the runtime's own profile still applies)
//
// Each block ends in its three returns, allow, deny, kill, in that order: the process
// backend splices its signal guard in before the last block's allow.
func Filter(goarches ...string) ([]Instruction, error) {
	if len(goarches) == 0 {
		return nil, fmt.Errorf("building the seccomp filter: no architecture")
	}
	var prog []Instruction
	for i, goarch := range goarches {
		b, err := block(goarch)
		if err != nil {
			return nil, err
		}
		if i < len(goarches)-1 {
			b[1].Jf = uint8(skip(1, len(b))) // another arch: the next block's first instruction
		}
		prog = append(prog, b...)
	}
	return prog, nil
}

// AllArches are the architectures Arches covers, in a fixed order: what a filter
// built for a machine the server does not know (a pod's node, a remote engine) covers.
func AllArches() []string {
	out := make([]string, 0, len(Arches))
	for a := range Arches {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// block is Filter's program for one architecture, entered at its first instruction.
func block(goarch string) ([]Instruction, error) {
	arch, nrs, err := Numbers(goarch)
	if err != nil {
		return nil, err
	}
	kernel, err := kernelRules(goarch)
	if err != nil {
		return nil, err
	}
	head := 3 // load arch, jump on it, load nr
	if arch.ForeignBit != 0 {
		head++ // jump on the bit
	}
	n := head + len(nrs) + len(kernel)
	deny, kill := n+1, n+2 // n: allow
	if kill > 255 {
		return nil, fmt.Errorf("building the seccomp filter: %d instructions, more than one BPF jump can skip", kill)
	}
	prog := []Instruction{
		load(OffArch),
		jumpEq(arch.Audit, 0, skip(1, kill)),
		load(OffNr),
	}
	if arch.ForeignBit != 0 {
		prog = append(prog, jumpSet(arch.ForeignBit, skip(3, kill), 0))
	}
	for _, nr := range nrs {
		prog = append(prog, jumpEq(nr, skip(len(prog), deny), 0))
	}
	prog = append(prog, kernel...)
	prog = append(prog, ret(RetAllow), ret(RetErrno|Errno), ret(RetKillProcess))
	if len(prog) != kill+1 {
		return nil, fmt.Errorf("building the seccomp filter: layout is off (%d instructions)", len(prog))
	}
	return prog, nil
}

// kernelRules is a self-contained piece of the filter: it expects the syscall
// number in the accumulator and, for any call it does not decide, falls through to
// the instruction after it with the number in the accumulator again.
//
//	clone3                          -> errno ENOSYS (glibc falls back to clone)
//	nr is one of Kernel             -> errno EPERM
//	clone with a CLONE_NEW* flag    -> errno EPERM
//	otherwise                       -> next instruction
func kernelRules(goarch string) ([]Instruction, error) {
	nrs, err := KernelNumbers(goarch)
	if err != nil {
		return nil, err
	}
	k := len(nrs)
	eperm, enosys, end := k+6, k+7, k+8
	prog := []Instruction{jumpEq(Clone3.Number(goarch), skip(0, enosys), 0)}
	for _, nr := range nrs {
		prog = append(prog, jumpEq(nr, skip(len(prog), eperm), 0))
	}
	prog = append(prog,
		jumpEq(Clone.Number(goarch), 0, skip(k+1, end)),
		load(OffArg0),
		jumpSet(CloneNamespaceFlags, skip(k+3, eperm), 0),
		load(OffNr),
		Instruction{Op: opJump, K: uint32(skip(k+5, end))},
		ret(RetErrno|Errno),
		ret(RetErrno|CloneENOSYS),
	)
	if len(prog) != end {
		return nil, fmt.Errorf("building the seccomp filter's kernel rules: layout is off (%d instructions)", len(prog))
	}
	return prog, nil
}

// Encode is prog as the kernel reads an array of struct sock_filter on a little-endian
// machine (amd64, arm64): 8 bytes an instruction.
func Encode(prog []Instruction) []byte {
	b := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		b = binary.LittleEndian.AppendUint16(b, in.Op)
		b = append(b, in.Jt, in.Jf)
		b = binary.LittleEndian.AppendUint32(b, in.K)
	}
	return b
}
