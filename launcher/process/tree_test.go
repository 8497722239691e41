package process

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// The tree kill against the outrun attack: a tree whose processes continue
// each other and fork. Which of a scan, a stop, a continue and a fork comes first is
// a race; these tests replace killTree's scan (scanProcs) with one that makes the
// attacker's move at the moment that beats the kill, so that each outcome is certain
// rather than likely.

// forker starts, as root of its own process group, a Python process that ignores
// SIGCHLD and forks a sleeping child for each line it reads, printing the child's
// pid. It returns the process and a function that makes it fork and returns the
// child's pid; everything is killed at the test's end.
func forker(t *testing.T) (*exec.Cmd, func() int) {
	t.Helper()
	if python() == "" {
		t.Fatal("python3 not found")
	}
	cmd := exec.Command(python(), "-I", "-c", `
import os, signal, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
print("ready", flush=True)
for _ in sys.stdin:
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    print(pid, flush=True)
`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	out := bufio.NewScanner(outp)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("forker did not start: %q %v", out.Text(), out.Err())
	}
	fork := func() int {
		if _, err := in.Write([]byte("fork\n")); err != nil {
			t.Fatalf("asking the forker to fork: %v", err)
		}
		if !out.Scan() {
			t.Fatalf("forker gave no child pid: %v", out.Err())
		}
		pid, err := strconv.Atoi(strings.TrimSpace(out.Text()))
		if err != nil {
			t.Fatalf("forker's child pid: %v", err)
		}
		return pid
	}
	return cmd, fork
}

// withScan makes killTree call scan (with the round number) instead of readProcs
// until the test ends.
func withScan(t *testing.T, scan func(round int) ([]proc, error)) {
	t.Helper()
	round := 0
	scanProcs = func() ([]proc, error) {
		defer func() { round++ }()
		return scan(round)
	}
	t.Cleanup(func() { scanProcs = readProcs })
}

// waitState waits until pid's state satisfies ok, for at most 5 s.
func waitState(t *testing.T, pid int, what string, ok func(byte) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p, found := readStat(pid); found && ok(p.state) {
			return
		}
	}
	t.Fatalf("process %d never became %s", pid, what)
}

func stoppedState(s byte) bool { return s == 'T' || s == 't' }

// TestKillTreeStopsAContinuedProcessAgain: a process that is stopped, then continued
// by another of its tree (which was still running while the round stopped them one
// by one), and forks after the next scan, is stopped again, and so is its child: the
// kill ends with both dead. Before the fix a pid was stopped once only: the next scan
// found no new pid, the kill sent SIGKILL to the pids it had, and the child forked
// after that scan lived on.
func TestKillTreeStopsAContinuedProcessAgain(t *testing.T) {
	cmd, fork := forker(t)
	root := cmd.Process.Pid
	var child int
	withScan(t, func(round int) ([]proc, error) {
		if round != 1 {
			return readProcs()
		}
		// Round 0 stopped root. Its sibling continues it; the scan sees it running,
		// and root forks right after the scan.
		waitState(t, root, "stopped", stoppedState)
		if err := syscall.Kill(root, syscall.SIGCONT); err != nil {
			t.Errorf("continuing %d: %v", root, err)
		}
		waitState(t, root, "running", func(s byte) bool { return !stoppedState(s) })
		procs, err := readProcs()
		child = fork()
		return procs, err
	})
	if _, err := killTree(root, true); err != nil {
		t.Fatalf("killTree: %v", err)
	}
	if child == 0 {
		t.Fatal("the scan's second round never ran")
	}
	if !waitGone([]int{root, child}, 5*time.Second) {
		t.Fatalf("after killTree: root %d alive %v, its child %d (forked after the scan that saw root continued) alive %v; want both dead",
			root, pidAlive(root), child, pidAlive(child))
	}
}

// TestKillTreeKillsEverySeenProcessWhenItGivesUp: a tree that shows a new running
// process at every scan (one that no pid can have: kill finds none) never lets the
// rounds end; after the last one every real process seen is killed all the same,
// and the error says so. Before the fix the kill returned its error after 1000
// rounds without sending any SIGKILL: root and its child lived on, stopped.
func TestKillTreeKillsEverySeenProcessWhenItGivesUp(t *testing.T) {
	cmd, fork := forker(t)
	root := cmd.Process.Pid
	child := fork()
	const noSuchPid = 1 << 23 // above PID_MAX_LIMIT (1<<22): no process has it
	rounds := 0
	withScan(t, func(round int) ([]proc, error) {
		rounds = round + 1
		// The tree alone (a whole /proc a thousand times is slow under -race).
		var procs []proc
		for _, pid := range []int{root, child} {
			if p, ok := readStat(pid); ok {
				procs = append(procs, p)
			}
		}
		return append(procs, proc{pid: noSuchPid + round, ppid: root, state: 'R'}), nil
	})
	_, err := killTree(root, true)
	if err == nil || !strings.Contains(err.Error(), "rounds") {
		t.Errorf("killTree after %d rounds: got error %v, want one naming the rounds", rounds, err)
	}
	if !waitGone([]int{root, child}, 5*time.Second) {
		t.Fatalf("after killTree gave up (%d rounds, %v): root %d alive %v, its child %d alive %v; want both killed",
			rounds, err, root, pidAlive(root), child, pidAlive(child))
	}
}

// leaderState is the state /proc/<pid>/stat shows: the leader thread's alone.
func leaderState(pid int) byte {
	s, _, err := statState("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return s
}

// TestStatState: the stat parser reads the state and ppid after the last ')' of the
// line, so a comm that holds ") (", spaces or a fake state cannot pass for fields.
// A parser that split at the first ')' (or on spaces) reads the comm's tail instead.
func TestStatState(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, line string
		state      byte
		ppid       int
		bad        bool
	}{
		{name: "plain", line: "1234 (python3) S 1 1234 1234 0 -1 4194560 ...\n", state: 'S', ppid: 1},
		{name: "comm with ) (", line: "42 (a) (b) R 7 42 42 0 -1\n", state: 'R', ppid: 7},
		{name: "comm faking fields", line: "42 (x) Z 1 ) S 9 42 42\n", state: 'S', ppid: 9},
		{name: "comm with spaces", line: "42 (a b  c) T 3 42\n", state: 'T', ppid: 3},
		{name: "zombie", line: "99 (true) Z 42 99 99 0 -1 4227084\n", state: 'Z', ppid: 42},
		{name: "no )", line: "42 (broken S 1 42\n", bad: true},
		{name: "nothing after comm", line: "42 (x)", bad: true},
		{name: "no ppid", line: "42 (x) S\n", bad: true},
		{name: "state not one byte", line: "42 (x) SS 1\n", bad: true},
		{name: "ppid not a number", line: "42 (x) S one\n", bad: true},
	} {
		path := dir + "/" + strings.ReplaceAll(tc.name, " ", "_")
		if err := os.WriteFile(path, []byte(tc.line), 0o600); err != nil {
			t.Fatal(err)
		}
		state, ppid, err := statState(path)
		switch {
		case tc.bad && err == nil:
			t.Errorf("%s: statState(%q) = %c, %d, nil; want an error", tc.name, tc.line, state, ppid)
		case !tc.bad && (err != nil || state != tc.state || ppid != tc.ppid):
			t.Errorf("%s: statState(%q) = %c, %d, %v; want %c, %d, nil", tc.name, tc.line, state, ppid, err, tc.state, tc.ppid)
		}
	}
	if _, _, err := statState(dir + "/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("statState of a missing file: got %v, want fs.ErrNotExist (a process that has gone)", err)
	}
}

// TestStatStateOfAProcessNamedToMislead: the same against the kernel's own line, for
// a live process that renamed itself (prctl(PR_SET_NAME)) to look like fields.
func TestStatStateOfAProcessNamedToMislead(t *testing.T) {
	if python() == "" {
		t.Fatal("python3 not found")
	}
	cmd := exec.Command(python(), "-I", "-c", `
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, b"a) (b) Z 1 2")  # PR_SET_NAME
print("ready", flush=True)
sys.stdin.read()
`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("the program did not start: %q", sc.Text())
	}
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if !strings.Contains(string(stat), "(a) (b) Z 1 2)") {
		t.Fatalf("the rename did not take: %q", stat)
	}
	state, ppid, err := statState("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	// S as it waits on stdin; R if the read caught it on its way there (a loaded
	// machine), never the Z of its name.
	if err != nil || (state != 'S' && state != 'R') || ppid != os.Getpid() {
		t.Errorf("statState of %q: got %c, %d, %v; want S (or R), %d, nil", stat, state, ppid, err, os.Getpid())
	}
}

// TestKillTreeKillsAProcessWhoseLeaderExited: a program's main thread that ends
// with exit(2) (not exit_group) leaves its process showing Z in /proc/<pid>/stat
// while its other threads run on. That process is not gone: the tree kill kills it.
// Before the fix it counted as a zombie, was never signalled, and its thread
// outlived the kill (and the leftovers check and waitGone called it gone).
func TestKillTreeKillsAProcessWhoseLeaderExited(t *testing.T) {
	if python() == "" {
		t.Fatal("python3 not found")
	}
	cmd := exec.Command(python(), "-I", "-c", fmt.Sprintf(`
import ctypes, threading, time
threading.Thread(target=lambda: time.sleep(600)).start()
print("ready", flush=True)
ctypes.CDLL(None).syscall(%d, 0)  # exit(2) of the main thread only
`, unix.SYS_EXIT))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("the program did not start: %q", sc.Text())
	}
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); leaderState(pid) != 'Z'; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader of %d never showed Z (state %c)", pid, leaderState(pid))
		}
	}
	if p, ok := readStat(pid); !ok || !alive(p) {
		t.Errorf("a process whose leader exited but whose thread runs: got alive %v (state %c), want alive", ok && alive(p), p.state)
	}
	if _, err := killTree(pid, true); err != nil {
		t.Fatalf("killTree: %v", err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatalf("after killTree, process %d (leader exited) still runs a thread: want it killed", pid)
	}
}

// zombie makes a child of the test process (the server here) that exits at once and
// is not reaped, and waits until it is a zombie.
func zombie(t *testing.T) int {
	t.Helper()
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = syscall.Wait4(pid, nil, syscall.WNOHANG, nil) })
	waitState(t, pid, "a zombie", func(s byte) bool { return s == 'Z' })
	return pid
}

// TestLeftoversCountUnreapedZombies: a process of an ended run that has died but is
// not reaped yet still holds its share of the container's pids limit (and of
// RLIMIT_NPROC), so the leftovers check counts it, and a Serial removal sweeps again
// until it is reaped, also when it became a zombie after the removal's sweep. Before
// the fix the check counted zombies as gone: a run could be removed (and the next one
// started) with the pids of the last one still taken.
func TestLeftoversCountUnreapedZombies(t *testing.T) {
	b := New(Options{
		Scratch: t.TempDir(), Limits: Limits{CPUSeconds: 60, Files: 256}, SweepEvery: time.Hour,
		Serial: true, Log: zerolog.New(zerolog.NewTestWriter(t)),
	})
	t.Cleanup(func() { _ = b.Close(context.Background()) })

	z := zombie(t)
	b.mu.Lock()
	left := b.leftovers(0)
	b.mu.Unlock()
	if !slices.Contains(left, z) {
		t.Errorf("leftovers with the unreaped zombie %d below the server: got %v, want it among them", z, left)
	}
	b.sweep()
	if _, ok := readStat(z); ok {
		t.Fatalf("zombie %d not reaped by the sweep", z)
	}

	// A zombie that appears after the removal's sweep, at its leftovers scan.
	s := start(t, b, "print('ran')")
	<-s.conn.Done()
	if _, err := b.Inspect(t.Context(), s.id); err != nil {
		t.Fatal(err)
	}
	late := 0
	withScan(t, func(round int) ([]proc, error) {
		if round == 0 {
			late = zombie(t)
		}
		return readProcs()
	})
	if err := b.Remove(t.Context(), s.id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if late == 0 {
		t.Fatal("the removal never checked for leftovers")
	}
	if p, ok := readStat(late); ok {
		t.Fatalf("after Remove, the zombie %d that appeared after its sweep is still there (state %c): want it reaped", late, p.state)
	}
}
