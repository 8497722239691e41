package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killsAll reports whether Kill may end a run with kill(-1, SIGKILL): Serial, the
// server is PID 1 and not root, and no other run has processes.
func (b *Backend) killsAll() bool {
	if !b.opts.Serial || os.Getpid() != 1 || os.Getuid() == 0 || os.Geteuid() == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	started := 0
	for _, r := range b.runs {
		if r.cmd != nil {
			started++
		}
	}
	return started <= 1
}

// killAllRounds bounds the helper's rounds: one kill(-1) is atomic against fork, so a
// second is only for a process that was between exec and its first instruction.
const killAllRounds = 5

// killAll kills every process of the server's user but the server, with kill(-1,
// SIGKILL) from a helper (this binary re-executed: kill(-1) spares its sender and the
// namespace's init, the server). The kernel signals every process in one pass under
// the task list lock, and a fork under way when it does fails: no process can fork
// its way out, nor continue a stopped one to run ahead of the kill. Then it reaps
// what was reparented to the server and checks that nothing of the runs is left in
// the server's tree, zombies included.
func (b *Backend) killAll() error {
	for round := 0; round < killAllRounds; round++ {
		b.mu.Lock() // held across every fork, and no sweep takes the helper for a stray
		err := runKillHelper()
		b.mu.Unlock()
		if err != nil {
			return err
		}
		if len(b.settle()) == 0 {
			return nil
		}
	}
	left := b.settle()
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("processes %v are still there (alive or unreaped) after %d rounds of kill(-1, SIGKILL)", left, killAllRounds)
}

// runKillHelper runs the helper that sends kill(-1, SIGKILL); mu must be held (a
// sweep would take the helper for a stray).
func runKillHelper() error {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = wrapperArgs("killall", Limits{}, nil)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("running the kill helper: %w (%s)", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// idleKillsAll reports (mu held) whether the sweep may kill strays with kill(-1):
// Serial, PID 1 and not root, and no run's bootstrap alive, so that every process
// of the user below the server is a stray.
func (b *Backend) idleKillsAll() bool {
	return b.opts.Serial && len(b.live) == 0 && os.Getpid() == 1 && os.Getuid() != 0 && os.Geteuid() != 0
}

// leftovers are the processes below the server (a run's processes can be nowhere
// else: every run's bootstrap and the server are subreapers), but for except (a run's
// wrapper, 0 for none) and everything below it. Zombies count until they are reaped:
// the pids cgroup and RLIMIT_NPROC count them too, and one that became a zombie after
// the last sweep still holds its share of the next run's limit (the sweep reaps it).
// Only a run's wrapper that has ended is left out: its own Wait reaps it. A process an
// operator started in the container (docker exec) has its parent outside the
// namespace and is not counted. Called with mu held.
func (b *Backend) leftovers(except int) []int {
	procs, err := scanProcs()
	if err != nil {
		return []int{-1}
	}
	skip := map[int]bool{}
	if except > 0 {
		skip[except] = true
		for _, p := range descendants(procs, except) {
			skip[p.pid] = true
		}
	}
	var out []int
	for _, p := range descendants(procs, os.Getpid()) {
		if !skip[p.pid] && (alive(p) || !b.live[p.pid]) {
			out = append(out, p.pid)
		}
	}
	return out
}

// settleRounds bounds settle's sweeps.
const settleRounds = 20

// settle sweeps until no leftover is left below the server (a zombie that appeared
// after one sweep is reaped by the next), for at most settleRounds sweeps, and
// returns what is still there.
func (b *Backend) settle() []int {
	for round := 0; ; round++ {
		b.sweep()
		b.mu.Lock()
		left := b.leftovers(0)
		b.mu.Unlock()
		if len(left) == 0 || round >= settleRounds {
			return left
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killAllHelper is the helper's body: kill(-1, SIGKILL) once its parent is verified
// to be PID 1 and itself not root (kill(-1) from root, or outside a PID namespace of
// its own, would reach processes that are not the runs').
func killAllHelper() int {
	if os.Getppid() != 1 || os.Getuid() == 0 || os.Geteuid() == 0 {
		fmt.Fprintf(os.Stderr, "mcp-exec: kill helper: refusing kill(-1): parent %d (want 1), uid %d (want non-root)\n", os.Getppid(), os.Getuid())
		return 70
	}
	if err := unix.Kill(-1, syscall.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		fmt.Fprintf(os.Stderr, "mcp-exec: kill helper: kill(-1, SIGKILL): %v\n", err)
		return 70
	}
	return 0
}
