package process

import (
	"bytes"
	"errors"
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

// readStat parses /proc/<pid>/stat: "pid (comm) state ppid ...", where comm may hold
// any byte, ')' included, so the fields start after the last ')'.
func readStat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, state: f[0][0]}, true
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
// scan finds none running that was not already stopped; then all of them are killed.
// A process forked between a scan and its parent's stop is found by the next scan
// (below its parent, or, if that has died, below the nearest subreaper, which is root
// or the caller). It returns how many processes it killed.
func killTree(root int, withRoot bool) (int, error) {
	stopped := map[int]bool{}
	var last []proc
	for round := 0; ; round++ {
		procs, err := readProcs()
		if err != nil {
			return 0, err
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
		fresh := 0
		for _, p := range set {
			if alive(p) && !stopped[p.pid] {
				fresh++
				stopped[p.pid] = true
				_ = syscall.Kill(p.pid, syscall.SIGSTOP)
			}
		}
		if fresh == 0 {
			break
		}
		if round > 1000 {
			return 0, errors.New("processes kept appearing after 1000 rounds of stopping them")
		}
	}
	n := 0
	for _, p := range last {
		if alive(p) {
			n++
		}
	}
	// Kill every process stopped on the way, not only those of the last scan: one that
	// moved (reparented) stays stopped otherwise.
	for pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return n, nil
}

// waitGone waits until none of pids is alive any more (zombies count as gone), for at
// most d. It reports whether they all went.
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
