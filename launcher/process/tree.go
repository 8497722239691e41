package process

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// proc is one process as /proc/<pid>/stat shows it.
type proc struct {
	pid, ppid int
	state     byte // R, S, D, T, t, Z, ...
}

// readProcs lists every process of the PID namespace (as /proc shows it).
func readProcs() ([]proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]proc, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		p, ok := readStat(pid)
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// statState parses a /proc stat file (/proc/<pid>/stat or /proc/<pid>/task/<tid>/stat):
// "pid (comm) state ppid ...". comm is the program's own choice (prctl(PR_SET_NAME),
// the file it runs) and may hold any byte, spaces and ')' included, so the fields are
// read after the last ')' of the line: the kernel writes none after comm.
func statState(path string) (state byte, ppid int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("parsing %s: no ')' after comm", path)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("parsing %s: no state and ppid after comm", path)
	}
	ppid, err = strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, fmt.Errorf("parsing %s: ppid: %w", path, err)
	}
	return f[0][0], ppid, nil
}

// readStat reads process pid as /proc/<pid>/stat shows it, its state that of its
// whole thread group (groupState). It reports false when the process is gone.
func readStat(pid int) (proc, bool) {
	state, ppid, err := statState("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, state: groupState(pid, state)}, true
}

// groupState is the state of the whole process given its leader's: /proc/<pid>/stat
// shows the leader thread only, and a leader that ended by itself (exit(2), not
// exit_group) shows Z while the process's other threads run on. Such a process is
// not gone: it counts as running (or stopped) as its live threads are.
func groupState(pid int, leader byte) byte {
	if leader != 'Z' {
		return leader
	}
	tids, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return leader
	}
	state := leader
	for _, t := range tids {
		s, _, err := statState("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread has gone
		}
		switch s {
		case 'Z', 'X':
		case 'T', 't':
			state = s
		default:
			return s // a live thread that is not stopped
		}
	}
	return state
}

// descendants returns the processes below root (root excluded), zombies included.
func descendants(procs []proc, root int) []proc {
	kids := map[int][]proc{}
	for _, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], p)
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range kids[pid] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

func alive(p proc) bool { return p.state != 'Z' && p.state != 'X' }

// killTree stops, then kills, root (when withRoot) and every process below it. A
// stopped process cannot fork, so the processes are stopped round after round until a
// scan finds every one of them stopped; then all of them are killed. A process forked
// between a scan and its parent's stop is found by the next scan (below its parent,
// or, if that has died, below the nearest subreaper, which is root or the caller). A
// process that was continued (a program may send SIGCONT to its own) is stopped again
// at the next scan. However the rounds end, even after too many of them, every
// process ever seen is sent SIGKILL before it returns. It returns how many processes
// it killed.
//
// It is not atomic: a tree that keeps continuing and forking may still leave a
// process it has not seen (the caller sweeps again). Where no other run can be
// hurt, Kill uses kill(-1, SIGKILL) instead (killall.go), which is.
func killTree(root int, withRoot bool) (int, error) {
	seen := map[int]bool{}
	var last []proc
	var err error
	for round := 0; ; round++ {
		procs, rerr := scanProcs()
		if rerr != nil {
			err = rerr
			break
		}
		set := descendants(procs, root)
		if withRoot {
			for _, p := range procs {
				if p.pid == root {
					set = append(set, p)
				}
			}
		}
		last = set
		running := 0
		for _, p := range set {
			if !alive(p) {
				continue
			}
			seen[p.pid] = true
			if p.state != 'T' && p.state != 't' {
				running++
				_ = syscall.Kill(p.pid, syscall.SIGSTOP)
			}
		}
		if running == 0 {
			break
		}
		if round >= maxStopRounds {
			err = fmt.Errorf("processes kept running after %d rounds of stopping them (killed every one seen)", maxStopRounds)
			break
		}
	}
	n := 0
	for _, p := range last {
		if alive(p) {
			n++
		}
	}
	// Kill every process seen on the way, not only those of the last scan: one that
	// moved (reparented) stays stopped otherwise.
	for pid := range seen {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return n, err
}

// maxStopRounds bounds killTree's rounds.
const maxStopRounds = 1000

// scanProcs is the scan of killTree and of the leftovers check: readProcs, but for
// tests, which put an adversary's move at an exact point (tree_test.go).
var scanProcs = readProcs

// waitGone waits until none of pids is alive any more (zombies count as gone, but
// not a zombie leader whose threads run on), for at most d. It reports whether they all went.
func waitGone(pids []int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := 0
		for _, pid := range pids {
			if p, ok := readStat(pid); ok && alive(p) {
				left++
			}
		}
		if left == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}
