package process_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/process"
)

var hostPython = sync.OnceValue(func() string {
	out, _ := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	return strings.TrimSpace(string(out))
})

// newLauncher is the launcher of standalone mode, on the host: the process backend
// behind the shared lifecycle, the real bootstrap.
func newLauncher(t *testing.T, o launcher.Options) *launcher.Launcher {
	t.Helper()
	// The bootstrap's output directory is launcher.OutputDir itself (programs name it
	// absolutely), which on the host is the host's: clear it around each test (the
	// server's wipe does it in its container; here Wipe stays off).
	clear := func() { _ = os.RemoveAll(launcher.OutputDir) }
	clear()
	t.Cleanup(clear)
	log := zerolog.New(zerolog.NewTestWriter(t))
	be := process.New(process.Options{Scratch: t.TempDir(), SweepEvery: time.Hour, Log: log})
	o.Python = hostPython()
	o.Logger = log
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = 1
	}
	l, err := launcher.New(be, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Close(ctx)
		_ = be.Close(ctx)
	})
	return l
}

func TestLauncherRunsThroughTheBootstrap(t *testing.T) {
	l := newLauncher(t, launcher.Options{})
	res, err := l.Run(t.Context(), launcher.Job{
		Code:  "import os, sys\nprint(open('in.txt').read(), sys.stdin.read())\nos.makedirs('outputs', exist_ok=True)\nopen('outputs/r.txt','w').write('out')\nprint('err', file=sys.stderr)\nsys.exit(3)",
		Stdin: "from stdin",
		Files: []launcher.File{{Name: "in.txt", Data: []byte("from file")}},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Stdout != "from file from stdin\n" || res.Stderr != "err\n" || res.ExitCode != 3 {
		t.Fatalf("got stdout %q stderr %q exit %d, want %q %q 3", res.Stdout, res.Stderr, res.ExitCode, "from file from stdin\n", "err\n")
	}
	if len(res.Files) != 1 || res.Files[0].Name != "r.txt" || string(res.Files[0].Data) != "out" {
		t.Fatalf("files: got %+v, want r.txt holding \"out\"", res.Files)
	}
}

func TestLauncherTimeoutKillsTheTree(t *testing.T) {
	l := newLauncher(t, launcher.Options{})
	pidFile := t.TempDir() + "/pid"
	res, err := l.Run(t.Context(), launcher.Job{
		Code: `import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(` + "'" + pidFile + "'" + `, "w").write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
time.sleep(600)`,
		Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.TimedOut {
		t.Fatalf("got %+v, want timed_out", res)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the double-forked process did not write its pid: %v", err)
	}
	// SIGKILL reached it before Run returned, but the kernel may still be taking it
	// down (state R, seen in CI, or D): it must be a zombie or gone within 5 s. A
	// process the kill missed sleeps for 600 s, and fails this.
	pid := strings.TrimSpace(string(b))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("double-forked process %s alive 5 s after the timeout: %s", pid, st)
		}
	}
}

func TestLauncherOutputCap(t *testing.T) {
	l := newLauncher(t, launcher.Options{MaxOutputBytes: 1000})
	res, err := l.Run(t.Context(), launcher.Job{Code: "print('x' * 5000)"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.Truncated || len(res.Stdout) > 1000 {
		t.Fatalf("got truncated %v, %d bytes, want truncated at 1000", res.Truncated, len(res.Stdout))
	}
}
