package process

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// The signal guard: the part of the per-run seccomp filter that keeps a run from
// signalling the server. It is a block of its own, spliced into the filter before its
// final "allow" (spliceGuard), so that the rest of the filter (seccomp.go) is built as
// if it were not there.
//
// Why the kernel's rule for a namespace's init is not enough: PID 1 gets every signal
// it has a handler for, and the Go runtime installs handlers for nearly all of them
// (SIGABRT, SIGSEGV, SIGQUIT, ... crash it). The server ignores every signal it can
// (cmd/mcp-exec: IgnoreSignals), which Go honours for signals sent by kill and tgkill
// (si_code SI_USER, SI_TKILL); but a SIGSEGV, SIGBUS or SIGFPE that arrives with any
// other si_code is taken for a fault of the server's own and crashes it, and a
// program can choose the si_code (rt_sigqueueinfo, rt_tgsigqueueinfo,
// pidfd_send_signal with a siginfo) or have the kernel send a signal of its choosing
// with a positive one (fcntl F_SETOWN + F_SETSIG: SIGIO aimed at any pid); and SIGTERM
// and SIGINT, which the server must handle (the orchestrator's stop), would reach it
// by kill. So a run is denied (EPERM):
//
//   - kill, tgkill, rt_tgsigqueueinfo and pidfd_open aimed at the server: pid 1, the
//     server's own pid and process group (when it is not 1) and every thread id the
//     server had when the run started (kill of a thread id signals its process);
//   - tkill, rt_sigqueueinfo and pidfd_send_signal, whatever the target: a bare thread
//     id, a pid, or a pidfd (which a program can also get by opening /proc/1) cannot be
//     told from the server's in a filter, and programs have kill and tgkill for their
//     own processes;
//   - fcntl F_SETOWN, F_SETOWN_EX and F_SETSIG (the target of SIGIO and its number);
//   - prlimit64 setting the limits of another process (pid other than 0): same-user
//     processes may lower each other's limits, and an RLIMIT_CPU of 1 s on the server
//     is a SIGKILL from the kernel, which even init cannot refuse.
//
// The run's wrapper starts a new session (Setsid), so a program cannot join the
// server's process group either (setpgid across sessions fails) nor reach a
// controlling terminal.

// guardSyscalls are the numbers the guard inspects, per architecture.
type guardSyscalls struct {
	kill, tkill, tgkill, sigqueue, tgsigqueue, pidfdOpen, pidfdSend, fcntl, prlimit uint32
}

var guardTable = map[string]guardSyscalls{
	"amd64": {kill: 62, tkill: 200, tgkill: 234, sigqueue: 129, tgsigqueue: 297, pidfdOpen: 434, pidfdSend: 424, fcntl: 72, prlimit: 302},
	"arm64": {kill: 129, tkill: 130, tgkill: 131, sigqueue: 138, tgsigqueue: 240, pidfdOpen: 434, pidfdSend: 424, fcntl: 25, prlimit: 261},
}

// maxGuarded bounds the targets the guard lists (each is one BPF instruction, and a
// conditional jump skips at most 255).
const maxGuarded = 96

// offArg is the offset of the low 32 bits of syscall argument i in seccomp_data (the
// kernel reads a pid or a command as an int: the high half does not count).
func offArg(i int) uint32 { return 16 + 8*uint32(i) }

// guardProgram is the guard's block for goarch: entered with the syscall number in A,
// it ends every path with a return. targets are the pids and thread ids to protect
// (as the kernel reads a pid_t: -pgid is the process group).
func guardProgram(goarch string, targets []uint32) ([]bpf.Instruction, error) {
	g, ok := guardTable[goarch]
	if !ok {
		return nil, fmt.Errorf("no signal guard table for GOARCH %s", goarch)
	}
	if len(targets) == 0 || len(targets) > maxGuarded {
		return nil, fmt.Errorf("signal guard: %d targets, want 1 to %d", len(targets), maxGuarded)
	}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	deny := bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(syscalls.Errno)}

	// Sections, each ending in a return; the dispatch jumps to them by index.
	target := []bpf.Instruction{bpf.LoadAbsolute{Off: offArg(0), Size: 4}}
	for i, t := range targets {
		target = append(target, bpf.JumpIf{Cond: bpf.JumpEqual, Val: t, SkipTrue: uint8(len(targets) - i)})
	}
	target = append(target, allow, deny)
	fcntl := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArg(1), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.F_SETOWN, SkipTrue: 3},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.F_SETSIG, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.F_SETOWN_EX, SkipTrue: 1},
		allow, deny,
	}
	prlimit := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArg(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 4}, // pid 0: the caller itself
		bpf.LoadAbsolute{Off: offArg(2), Size: 4},            // new limits: low half of the pointer
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 3},
		bpf.LoadAbsolute{Off: offArg(2) + 4, Size: 4}, // high half
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 1},
		allow, deny,
	}
	dispatch := []struct {
		nr   uint32
		to   int // section: 0 target, 1 fcntl, 2 prlimit, 3 deny
		name string
	}{
		{g.kill, 0, "kill"}, {g.tgkill, 0, "tgkill"}, {g.tgsigqueue, 0, "rt_tgsigqueueinfo"}, {g.pidfdOpen, 0, "pidfd_open"},
		{g.fcntl, 1, "fcntl"}, {g.prlimit, 2, "prlimit64"},
		{g.tkill, 3, "tkill"}, {g.sigqueue, 3, "rt_sigqueueinfo"}, {g.pidfdSend, 3, "pidfd_send_signal"},
	}
	// Layout: dispatch (one jump per call), allow, target, fcntl, prlimit, deny.
	start := []int{len(dispatch) + 1}
	start = append(start, start[0]+len(target))
	start = append(start, start[1]+len(fcntl))
	start = append(start, start[2]+len(prlimit))
	var prog []bpf.Instruction
	for i, d := range dispatch {
		skip := start[d.to] - i - 1
		if skip > 255 {
			return nil, fmt.Errorf("signal guard: a jump of %d instructions", skip)
		}
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: d.nr, SkipTrue: uint8(skip)})
	}
	prog = append(prog, allow)
	prog = append(prog, target...)
	prog = append(prog, fcntl...)
	prog = append(prog, prlimit...)
	prog = append(prog, deny)
	return prog, nil
}

// spliceGuard inserts guard into prog just before its final three returns (allow,
// deny, kill: seccomp.go's layout), moving every jump that crosses the insertion.
func spliceGuard(prog, guard []bpf.Instruction) ([]bpf.Instruction, error) {
	at := len(prog) - 3
	if at < 0 || !isRet(prog[at]) {
		return nil, fmt.Errorf("signal guard: the filter does not end in its three returns")
	}
	out := make([]bpf.Instruction, 0, len(prog)+len(guard))
	// A jump to the final allow (a fall through from the last check) enters the
	// guard instead; jumps to deny and kill move past it.
	move := func(i int, skip uint8) (uint8, error) {
		if i+1+int(skip) <= at {
			return skip, nil
		}
		n := int(skip) + len(guard)
		if n > 255 {
			return 0, fmt.Errorf("signal guard: a jump of %d instructions after splicing", n)
		}
		return uint8(n), nil
	}
	for i, ins := range prog[:at] {
		switch j := ins.(type) {
		case bpf.JumpIf:
			var err1, err2 error
			j.SkipTrue, err1 = move(i, j.SkipTrue)
			j.SkipFalse, err2 = move(i, j.SkipFalse)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%w%w", err1, err2)
			}
			ins = j
		case bpf.Jump:
			if i+1+int(j.Skip) > at {
				j.Skip += uint32(len(guard))
			}
			ins = j
		case bpf.JumpIfX:
			return nil, fmt.Errorf("signal guard: cannot splice into a filter with register jumps")
		}
		out = append(out, ins)
	}
	out = append(out, guard...)
	return append(out, prog[at:]...), nil
}

// serverTargets are what the guard protects, read in a run's wrapper: pid 1, the
// wrapper's parent (the server), the server's process group when it is not 1, and
// every thread of the server (in /proc/<server>/task, readable although the server is
// non-dumpable).
func serverTargets() []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	add := func(v uint32) {
		if !seen[v] && len(out) < maxGuarded {
			seen[v] = true
			out = append(out, v)
		}
	}
	add(1)
	server := os.Getppid()
	add(uint32(server))
	if pg, err := unix.Getpgid(server); err == nil && pg > 1 {
		add(uint32(-pg)) // kill(-pgid): the server's process group
	}
	for _, pid := range []int{1, server} {
		d, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			continue
		}
		for _, e := range d {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				add(uint32(tid))
			}
		}
	}
	return out
}
