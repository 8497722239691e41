package process

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

// python is the real interpreter (not a shim script), found once.
var python = sync.OnceValue(func() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
})

func TestMain(m *testing.M) {
	// The test binary plays the server: leftovers of runs are reparented to it.
	if err := MakeSubreaper(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func newTestBackend(t *testing.T) *Backend {
	t.Helper()
	if python() == "" {
		t.Fatal("python3 not found")
	}
	b := New(Options{
		Scratch:    t.TempDir(),
		Limits:     Limits{CPUSeconds: 60, Files: 256},
		SweepEvery: time.Hour, // sweeps only after runs, so that tests see them
		Log:        zerolog.New(zerolog.NewTestWriter(t)),
	})
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

var testEnv = []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}

func spec(argv ...string) backend.Spec {
	return backend.Spec{Command: argv, Env: testEnv, WorkDir: "/tmp", Memory: 512 << 20, Pids: 0, TmpfsSize: 64 << 20}
}

type started struct {
	id             string
	conn           backend.Conn
	stdout, stderr *syncbuf.Buffer
}

func start(t *testing.T, b *Backend, code string) started {
	t.Helper()
	id, err := b.Create(t.Context(), spec(python(), "-I", "-c", code))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	s := started{id: id, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}}
	s.conn, err = b.Start(t.Context(), id, s.stdout, s.stderr)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

// waitLine waits for a line of stdout with the prefix and returns its rest.
func waitLine(t *testing.T, s started, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(s.stdout.String(), "\n") {
			if v, ok := strings.CutPrefix(l, prefix); ok {
				return v
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %q line; stdout %q stderr %q", prefix, s.stdout.String(), s.stderr.String())
	return ""
}

func pidAlive(pid int) bool {
	p, ok := readStat(pid)
	return ok && alive(p)
}

// escapeCode double-forks a process into its own session (it leaves the run's
// process group and its parent), prints its pid, and sleeps.
const escapeCode = `
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, b"%d\n" % os.getpid())
        time.sleep(600)
    os._exit(0)
os.wait()
print("escaped", os.read(r, 32).decode().strip(), flush=True)
`

func TestKillTreeTakesEscapedProcesses(t *testing.T) {
	b := newTestBackend(t)
	s := start(t, b, escapeCode+"time.sleep(600)\n")
	pid, _ := strconv.Atoi(waitLine(t, s, "escaped "))
	if !pidAlive(pid) {
		t.Fatalf("escaped process %d not running before the kill", pid)
	}
	if err := b.Kill(t.Context(), s.id); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if !waitGone([]int{pid}, 5*time.Second) {
		t.Fatalf("escaped process %d (setsid + double fork) alive after Kill", pid)
	}
	ex, err := b.Inspect(t.Context(), s.id)
	if err != nil || ex.Code != 128+9 {
		t.Fatalf("Inspect: got %+v, %v, want code 137", ex, err)
	}
	if err := b.Remove(t.Context(), s.id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
}

// A run that ends normally leaves its double-forked process behind: the removal kills
// it, whether the process is still below the run's bootstrap or was reparented to the
// server because the program killed its own bootstrap first.
func TestRemoveKillsLeftovers(t *testing.T) {
	for _, tc := range []struct{ name, tail string }{
		{"ends", ""},
		{"kills its bootstrap", "os.kill(os.getppid(), 9)\ntime.sleep(600)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBackend(t)
			// The code runs as the wrapper's exec'd process; for the second case a
			// shell in between plays the bootstrap that the program kills.
			code := escapeCode + tc.tail
			var s started
			if tc.tail != "" {
				id, err := b.Create(t.Context(), spec("/bin/sh", "-c", `"$0" -I -c "$1"; echo end`, python(), code))
				if err != nil {
					t.Fatal(err)
				}
				s = started{id: id, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}}
				if s.conn, err = b.Start(t.Context(), id, s.stdout, s.stderr); err != nil {
					t.Fatal(err)
				}
			} else {
				s = start(t, b, code)
			}
			pid, _ := strconv.Atoi(waitLine(t, s, "escaped "))
			<-s.conn.Done()
			if _, err := b.Inspect(t.Context(), s.id); err != nil {
				t.Fatal(err)
			}
			if err := b.Remove(t.Context(), s.id); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			if pidAlive(pid) {
				t.Fatalf("leftover %d alive after Remove", pid)
			}
		})
	}
}

// With two runs at once, ending one kills only its own leftovers: the other's
// background process lives until its own run is removed.
func TestConcurrentRunsKeepTheirOwnProcesses(t *testing.T) {
	b := newTestBackend(t)
	a := start(t, b, escapeCode)
	c := start(t, b, escapeCode+"time.sleep(600)\n")
	pa, _ := strconv.Atoi(waitLine(t, a, "escaped "))
	pc, _ := strconv.Atoi(waitLine(t, c, "escaped "))
	<-a.conn.Done()
	if err := b.Remove(t.Context(), a.id); err != nil {
		t.Fatal(err)
	}
	if pidAlive(pa) {
		t.Fatalf("run A's leftover %d alive after A was removed", pa)
	}
	b.sweep()
	if !pidAlive(pc) {
		t.Fatalf("run B's process %d was killed by run A's removal", pc)
	}
	if err := b.Remove(t.Context(), c.id); err != nil {
		t.Fatal(err)
	}
	if pidAlive(pc) {
		t.Fatalf("run B's process %d alive after B was removed", pc)
	}
}

func TestRunDirectoryIsPrivateAndWiped(t *testing.T) {
	b := newTestBackend(t)
	s := start(t, b, `
import os, stat
print("cwd", os.getcwd())
print("home", os.environ["HOME"])
print("mode", oct(stat.S_IMODE(os.stat(".").st_mode)))
os.makedirs("a/b")
open("a/b/f", "w").write("x")
os.chmod("a/b", 0)
os.chmod("a", 0)
`)
	<-s.conn.Done()
	cwd := waitLine(t, s, "cwd ")
	if got := waitLine(t, s, "home "); got != cwd {
		t.Errorf("HOME: got %q, want the working directory %q", got, cwd)
	}
	if got := waitLine(t, s, "mode "); got != "0o700" {
		t.Errorf("run directory mode: got %s, want 0o700", got)
	}
	if filepath.Dir(cwd) != b.opts.Scratch {
		t.Errorf("run directory %q not under the scratch root %q", cwd, b.opts.Scratch)
	}
	if err := b.Remove(t.Context(), s.id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := os.Stat(cwd); !os.IsNotExist(err) {
		t.Fatalf("run directory %s after Remove: %v, want it gone", cwd, err)
	}
}

func TestEnvironmentIsTheFixedList(t *testing.T) {
	t.Setenv("MCP_EXEC_AUTH_TOKEN", "server-secret")
	b := newTestBackend(t)
	s := start(t, b, `import os; print("env", sorted(os.environ))`)
	got := waitLine(t, s, "env ")
	if strings.Contains(got, "MCP_EXEC") || got != "['HOME', 'LANG', 'PATH']" {
		t.Fatalf("environment: got %s, want ['HOME', 'LANG', 'PATH']", got)
	}
}

func TestOnlyThreeDescriptors(t *testing.T) {
	b := newTestBackend(t)
	s := start(t, b, `import os; print("fds", sorted(int(f) for f in os.listdir("/proc/self/fd")))`)
	// listdir's own descriptor is the fourth.
	if got := waitLine(t, s, "fds "); got != "[0, 1, 2, 3]" {
		t.Fatalf("descriptors: got %s, want [0, 1, 2, 3] (3 is listdir's own)", got)
	}
}

func TestLimitsApply(t *testing.T) {
	b := newTestBackend(t)
	s := start(t, b, `
import resource, os
print("lim", resource.getrlimit(resource.RLIMIT_DATA)[0], resource.getrlimit(resource.RLIMIT_CORE)[0],
      resource.getrlimit(resource.RLIMIT_NOFILE)[0], resource.getrlimit(resource.RLIMIT_MSGQUEUE)[0])
print("oom", open("/proc/self/oom_score_adj").read().strip())
try:
    b = bytearray(1 << 30)
    print("alloc ok")
except MemoryError:
    print("alloc MemoryError")
`)
	<-s.conn.Done()
	if got := waitLine(t, s, "lim "); got != strconv.Itoa(512<<20)+" 0 256 0" {
		t.Errorf("rlimits DATA CORE NOFILE MSGQUEUE: got %s", got)
	}
	if got := waitLine(t, s, "oom "); got != "1000" {
		t.Errorf("oom_score_adj: got %s, want 1000", got)
	}
	if got := waitLine(t, s, "alloc "); got != "MemoryError" {
		t.Errorf("1 GiB allocation under a 512 MiB RLIMIT_DATA: got %s, want MemoryError", got)
	}
}
