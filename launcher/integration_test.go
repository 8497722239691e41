package launcher

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
)

// testLauncher returns a launcher against the real engine. Outside CI a missing
// engine skips the test; in CI (CI=true) it fails, since a skipped sandbox test
// proves nothing.
func testLauncher(t testing.TB, opts Options) *Launcher {
	t.Helper()
	if os.Getenv("MCP_EXEC_TEST_BACKEND") == "process" {
		return testProcessLauncher(t, opts)
	}
	cli := enginetest.Client(t)
	if opts.Image == "" {
		opts.Image = enginetest.Image()
	}
	if opts.Instance == "" {
		opts.Instance = "test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
		if len(opts.Instance) > 60 {
			opts.Instance = opts.Instance[:60]
		}
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = enginetest.PoolSize()
	}
	if opts.Runtime == "" {
		opts.Runtime = enginetest.Runtime()
	}
	opts.Logger = enginetest.Logger(t)
	l, err := New(testBackend(t, cli, opts.Logger), opts)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.CheckAndReap(t, l)
	enginetest.StartPool(t, l, func(context.Context) { assertNoContainers(t, cli, l.opts.Instance) })
	return l
}

// listContainers lists containers as the engine answers, asking again while Podman
// answers with its /proc race (see docker.RetryProcRace), as the backend does.
func listContainers(ctx context.Context, cli *client.Client, opts client.ContainerListOptions) (client.ContainerListResult, error) {
	return docker.RetryProcRace(ctx, func() (client.ContainerListResult, error) {
		return cli.ContainerList(ctx, opts)
	})
}

func assertNoContainers(t testing.TB, cli *client.Client, instance string) {
	t.Helper()
	f := make(client.Filters).Add("label", LabelInstance+"="+instance)
	list, err := listContainers(context.Background(), cli, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	if len(list.Items) != 0 {
		t.Errorf("got %d containers left with instance %q, want 0", len(list.Items), instance)
	}
}

func TestRunHello(t *testing.T) {
	l := testLauncher(t, Options{})
	res, err := l.Run(t.Context(), Job{Code: "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nprint(sys.stdin.read().upper())", Stdin: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
}

func TestRunPrograms(t *testing.T) {
	l := testLauncher(t, Options{MaxOutputBytes: 64 << 10})
	tests := []struct {
		name       string
		job        Job
		wantExit   int
		wantOut    string // exact stdout
		wantErrHas string // substring of stderr
		wantTrunc  bool
	}{
		{name: "hello", job: Job{Code: "print('hello, world')"}, wantOut: "hello, world\n"},
		{name: "stderr", job: Job{Code: "import sys; sys.stderr.write('to stderr\\n')"}, wantErrHas: "to stderr"},
		{name: "stdin", job: Job{Code: "import sys; print(sys.stdin.read()[::-1])", Stdin: "abc\ndef"}, wantOut: "fed\ncba\n"},
		{name: "stdin absent reads EOF", job: Job{Code: "import sys; print(repr(sys.stdin.read()))"}, wantOut: "''\n"},
		{name: "stdin unread", job: Job{Code: "print('ignored stdin')", Stdin: strings.Repeat("x", 1<<20)}, wantOut: "ignored stdin\n"},
		{name: "exit code", job: Job{Code: "import sys; sys.exit(7)"}, wantExit: 7},
		{name: "exit message", job: Job{Code: "import sys; sys.exit('bad thing')"}, wantExit: 1, wantErrHas: "bad thing"},
		{name: "os._exit skips buffers", job: Job{Code: "import os; os._exit(3)"}, wantExit: 3},
		{name: "exception", job: Job{Code: "x = 1\nraise ValueError('boom')"}, wantExit: 1, wantErrHas: "File \"<exec>\", line 2, in <module>\n    raise ValueError('boom')\nValueError: boom"},
		// The source reaches linecache however the program asks for it (the bootstrap
		// registers it when linecache is first imported, or at once if it is loaded).
		{name: "source in a caught traceback", job: Job{Code: "import traceback\ndef f():\n    raise ValueError('x')\ntry:\n    f()\nexcept ValueError:\n    traceback.print_exc()"}, wantErrHas: "File \"<exec>\", line 3, in f\n    raise ValueError('x')\nValueError: x"},
		{name: "source in a warning", job: Job{Code: "import warnings\nwarnings.warn('careful')"}, wantErrHas: "<exec>:2: UserWarning: careful\n  warnings.warn('careful')"},
		{name: "syntax error", job: Job{Code: "def f(:\n  pass"}, wantExit: 1, wantErrHas: "SyntaxError"},
		{name: "killed by signal", job: Job{Code: "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"}, wantExit: 143},
		{name: "unicode", job: Job{Code: "print('héllo ✓ 日本')"}, wantOut: "héllo ✓ 日本\n"},
		{name: "invalid utf8 repaired", job: Job{Code: "import sys; sys.stdout.buffer.write(b'a\\xffb\\n')"}, wantOut: "a\uFFFDb\n"},
		{name: "clean main namespace", job: Job{Code: "print(sorted(k for k in globals() if not k.startswith('__')))"}, wantOut: "[]\n"},
		{name: "closed stdout", job: Job{Code: "import sys, os; print('before'); sys.stdout.flush(); os.close(1); sys.exit(4)"}, wantExit: 4, wantOut: "before\n"},
		// The program ends the way the interpreter's own exit ends it (the bootstrap
		// skips only the teardown of loaded modules): each of these would differ.
		{name: "exit code past 255", job: Job{Code: "import sys; sys.exit(258)"}, wantExit: 2},
		{name: "exit code negative", job: Job{Code: "raise SystemExit(-1)"}, wantExit: 255},
		{name: "exit None", job: Job{Code: "import sys; print('x'); sys.exit(None)"}, wantOut: "x\n"},
		{name: "atexit runs", job: Job{Code: "import atexit\natexit.register(lambda: print('at exit'))\nprint('main')"}, wantOut: "main\nat exit\n"},
		{name: "atexit sees exit code", job: Job{Code: "import atexit, sys\natexit.register(lambda: print('bye'))\nsys.exit(5)"}, wantExit: 5, wantOut: "bye\n"},
		{name: "non-daemon thread joined", job: Job{Code: "import threading, time\ndef w():\n    time.sleep(0.3); print('thread done')\nthreading.Thread(target=w).start()\nprint('main done')"}, wantOut: "main done\nthread done\n"},
		{name: "unflushed stdout", job: Job{Code: "import sys; sys.stdout.reconfigure(line_buffering=False); sys.stdout.write('no newline, no flush')"}, wantOut: "no newline, no flush"},
		{name: "finalizers run", job: Job{Code: "class A:\n    def __del__(self): print('del ran')\na = A()\nprint('end')"}, wantOut: "end\ndel ran\n"},
		{name: "keyboard interrupt", job: Job{Code: "raise KeyboardInterrupt"}, wantExit: 130, wantErrHas: "KeyboardInterrupt"},
		{name: "exception in atexit", job: Job{Code: "import atexit\ndef bad(): raise RuntimeError('in atexit')\natexit.register(bad)"}, wantErrHas: "RuntimeError: in atexit"},
		{name: "stdout closed by program", job: Job{Code: "import sys; print('a'); sys.stdout.close()"}, wantOut: "a\n"},
		// The bootstrap reads a program's exit from /proc once its output is closed and
		// the kernel shows it exiting (boot.py, exit_watch): a program that closes its
		// output and goes on, or exits beside a thread, still gets its own exit code.
		{name: "output closed, exit later", job: Job{Code: "import os, time; print('x', flush=True); os.close(1); os.close(2); time.sleep(0.5); os._exit(6)"}, wantExit: 6, wantOut: "x\n"},
		{name: "output closed, exit at once", job: Job{Code: "import os; print('y', flush=True); os.close(1); os.close(2); os._exit(9)"}, wantExit: 9, wantOut: "y\n"},
		{name: "exit beside a daemon thread", job: Job{Code: "import sys, threading, time\ndef spin():\n    while True: time.sleep(0.001)\nthreading.Thread(target=spin, daemon=True).start()\nprint('z')\nsys.exit(3)"}, wantExit: 3, wantOut: "z\n"},
		{name: "exit from a daemon thread", job: Job{Code: "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.05), os._exit(12)), daemon=True).start()\ntime.sleep(5)"}, wantExit: 12},
		// A timeout well above the default: the flood is about the cap, not speed, and
		// under gVisor on a 2-core host 3.4 MB of output took 22-32 s (measured
		// 2026-12-01, with the other subtests beside it), past the default 30 s.
		{name: "flood", job: Job{Code: "import sys\nfor i in range(200000): sys.stdout.write('0123456789abcdef\\n')\nprint('done', file=sys.stderr)", Timeout: 2 * time.Minute}, wantTrunc: true},
		{name: "background child left running", job: Job{Code: "import subprocess; subprocess.Popen(['sleep', '600']); print('started')"}, wantOut: "started\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := l.Run(t.Context(), tt.job)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tt.wantExit {
				t.Errorf("exit code: got %d, want %d (stderr %q)", res.ExitCode, tt.wantExit, res.Stderr)
			}
			if !tt.wantTrunc && res.Stdout != tt.wantOut {
				t.Errorf("stdout: got %q, want %q", res.Stdout, tt.wantOut)
			}
			if !strings.Contains(res.Stderr, tt.wantErrHas) {
				t.Errorf("stderr: got %q, want it to contain %q", res.Stderr, tt.wantErrHas)
			}
			if res.Truncated != tt.wantTrunc {
				t.Errorf("truncated: got %v, want %v", res.Truncated, tt.wantTrunc)
			}
			if tt.wantTrunc && len(res.Stdout)+len(res.Stderr) > 64<<10 {
				t.Errorf("output: got %d bytes, want at most %d", len(res.Stdout)+len(res.Stderr), 64<<10)
			}
			if res.TimedOut {
				t.Errorf("timed out: got true, want false")
			}
		})
	}
}

// TestTimeoutKillsProcessTree: the timeout must end the program and everything it
// started, including processes that ignore SIGTERM and daemons that left the tree.
func TestTimeoutKillsProcessTree(t *testing.T) {
	l := testLauncher(t, Options{})
	code := `
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
# a double-forked daemon that ignores SIGTERM too
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
    os._exit(0)
subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"])
print("spawned", flush=True)
while True:
    time.sleep(1)
`
	start := time.Now()
	res, err := l.Run(t.Context(), Job{Code: code, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("timed out: got false, want true (result %+v)", res)
	}
	if res.Stdout != "spawned\n" {
		t.Errorf("stdout: got %q, want %q (output before the timeout is kept)", res.Stdout, "spawned\n")
	}
	if res.ExitCode != 137 {
		t.Errorf("exit code: got %d, want 137", res.ExitCode)
	}
	if res.Duration < 2*time.Second || time.Since(start) > 15*time.Second {
		t.Errorf("duration: got %v (wall %v), want about 2s", res.Duration, time.Since(start))
	}
	// The container (and so every process of the program) is gone once the
	// launcher's cleanup has run: Close waits for it and the cleanup asserts it.
}

// TestCancelRemovesContainer: a caller that goes away still gets its container removed.
func TestCancelRemovesContainer(t *testing.T) {
	l := testLauncher(t, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	_, err := l.Run(ctx, Job{Code: "import time; time.sleep(60)"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got error %v, want context.DeadlineExceeded", err)
	}
}

// TestCloseEndsRuns: shutting the launcher down ends runs in flight and removes
// their containers.
func TestCloseEndsRuns(t *testing.T) {
	l := testLauncher(t, Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := l.Run(context.Background(), Job{Code: "import time; print('x', flush=True); time.sleep(60)"})
		errc <- err
	}()
	time.Sleep(1500 * time.Millisecond)
	// A grace period of one second: the run in flight is killed when it ends.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Close took %v, want about the grace period", d)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("run error: got %v, want ErrClosed", err)
	}
	if _, err := l.Run(t.Context(), Job{Code: "print(1)"}); !errors.Is(err, ErrClosed) {
		t.Errorf("run after close: got %v, want ErrClosed", err)
	}
}

// TestCloseLetsRunsFinish: within the grace period a run in flight completes
// normally while new runs are refused.
func TestCloseLetsRunsFinish(t *testing.T) {
	l := testLauncher(t, Options{})
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := l.Run(context.Background(), Job{Code: "import time; time.sleep(2); print('finished')"})
		done <- outcome{res, err}
	}()
	time.Sleep(1500 * time.Millisecond)
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		closed <- l.Close(ctx)
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := l.Run(t.Context(), Job{Code: "print(1)"}); !errors.Is(err, ErrClosed) {
		t.Errorf("run while closing: got %v, want ErrClosed", err)
	}
	o := <-done
	if o.err != nil || o.res.Stdout != "finished\n" {
		t.Errorf("run in flight: got %+v, %v; want it to finish", o.res, o.err)
	}
	if err := <-closed; err != nil {
		t.Error(err)
	}
}

func TestMissingImage(t *testing.T) {
	l := testLauncher(t, Options{PoolSize: -1}) // no pool: the test changes the image under it
	l.opts.Image = "mcp-exec/does-not-exist:never"
	if err := l.Check(t.Context()); !errors.Is(err, ErrImageMissing) {
		t.Errorf("Check: got %v, want ErrImageMissing", err)
	}
	if _, err := l.Run(t.Context(), Job{Code: "print(1)"}); !errors.Is(err, ErrImageMissing) {
		t.Errorf("Run: got %v, want ErrImageMissing", err)
	}
}

func TestEngineUnreachable(t *testing.T) {
	cli := enginetest.ClientAt(t, "unix:///nonexistent/docker.sock")
	l, err := New(testBackend(t, cli, zerolog.Nop()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // ends the orphan sweep the Run below starts (goleak)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Close(ctx) // the engine is absent: its last sweep cannot succeed
	})
	err = l.Check(t.Context())
	if !errors.Is(err, ErrEngineUnavailable) || !strings.Contains(err.Error(), "/nonexistent/docker.sock") {
		t.Errorf("Check: got %v, want ErrEngineUnavailable naming the socket", err)
	}
	if _, err := l.Run(t.Context(), Job{Code: "print(1)"}); !errors.Is(err, ErrEngineUnavailable) {
		t.Errorf("Run: got %v, want ErrEngineUnavailable", err)
	}
}

func TestMissingInterpreter(t *testing.T) {
	l := testLauncher(t, Options{Python: "python-nonexistent"})
	_, err := l.Run(t.Context(), Job{Code: "print(1)"})
	if err == nil {
		t.Fatal("got no error, want one for a missing interpreter")
	}
	t.Logf("error: %v", err)
}

func TestVerifyLimits(t *testing.T) {
	l := testLauncher(t, Options{Memory: 200 << 20, Pids: 64, CPUs: 0.5})
	lim, err := l.MeasureLimits(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{Memory: 200 << 20, Pids: 64, CPUQuota: lim.CPUPeriod / 2, CPUPeriod: lim.CPUPeriod, Runtime: "linux", IOUringSetup: "EPERM"}
	if l.Options().GVisor() {
		want.Runtime = "gvisor" // memory and pids were tried, not only read
	}
	if lim != want {
		t.Errorf("limits seen in the sandbox: got %+v, want %+v", lim, want)
	}
	if err := l.VerifyLimits(t.Context()); err != nil {
		t.Error(err)
	}
	// The check itself must be able to fail.
	if bad := l.Unenforced(Limits{Memory: -1, Pids: -1, CPUQuota: -1, CPUPeriod: 100000}); len(bad) != 3 {
		t.Errorf("unenforced limits: got %q, want all three", bad)
	}
	// Under gVisor, how the memory probe's child ended is in the report.
	probe := "a child touching twice that got MemoryError after 296 MiB, and was not killed"
	if bad := l.Unenforced(Limits{Memory: -1, MemoryProbe: probe, Pids: 64, CPUQuota: lim.CPUPeriod / 2, CPUPeriod: lim.CPUPeriod}); len(bad) != 1 || !strings.Contains(bad[0], "sees unlimited: "+probe) {
		t.Errorf("unenforced limits with a memory probe: got %q, want memory alone, with the probe", bad)
	}
	for _, seen := range []string{"allowed", "ENOSYS", ""} {
		if err := l.verifySeccomp(Limits{IOUringSetup: seen}); !errors.Is(err, ErrSeccompNotEnforced) {
			t.Errorf("io_uring_setup %q: got %v, want ErrSeccompNotEnforced", seen, err)
		}
	}
}

// TestOpenFilesFlushedAtExit: files the program leaves open, with data still in their
// buffers, are written out when it ends, as the interpreter's own exit does. (A file
// object in a reference cycle may lose its buffer at exit in CPython itself: not tested.)
func TestOpenFilesFlushedAtExit(t *testing.T) {
	l := testLauncher(t, Options{})
	code := "f = open('/tmp/outputs/top.txt', 'w'); f.write('top level')\n" +
		"def g():\n    g.f = open('/tmp/outputs/attr.txt', 'w'); g.f.write('on a function')\ng()\n"
	res, err := l.Run(t.Context(), Job{Code: code})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v, exit %d, stderr %q", err, res.ExitCode, res.Stderr)
	}
	want := map[string]string{"top.txt": "top level", "attr.txt": "on a function"}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Name] = string(f.Data)
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: got %q, want %q (files %v)", n, got[n], w, names(res.Files))
		}
	}
}

func TestFilesInAndOut(t *testing.T) {
	l := testLauncher(t, Options{MaxFileBytes: 1 << 20, MaxFilesBytes: 3 << 19})
	code := `
import os, pandas as pd, matplotlib.pyplot as plt
df = pd.read_csv("data/in.csv")
os.makedirs("/tmp/outputs/sub", exist_ok=True)
open("/tmp/outputs/sum.txt", "w").write(str(df["x"].sum()))
open("/tmp/outputs/sub/big.bin", "wb").write(b"z" * (2 << 20))
os.symlink("/etc/passwd", "/tmp/outputs/link")
plt.plot(df["x"])
plt.show()
plt.plot([3, 2, 1])
`
	res, err := l.Run(t.Context(), Job{Code: code, Files: []File{{Name: "data/in.csv", Data: []byte("x\n1\n2\n3\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	byName := map[string]OutputFile{}
	for _, f := range res.Files {
		byName[f.Name] = f
	}
	if got := string(byName["sum.txt"].Data); got != "6" {
		t.Errorf("sum.txt: got %q, want 6", got)
	}
	for _, n := range []string{"figure-1.png", "figure-2.png"} {
		if d := byName[n].Data; len(d) < 8 || string(d[1:4]) != "PNG" {
			t.Errorf("%s: got %d bytes, want a PNG (files %v)", n, len(d), names(res.Files))
		}
	}
	if f := byName["sub/big.bin"]; f.Skipped == "" || f.Data != nil || f.Size != 2<<20 {
		t.Errorf("sub/big.bin: got skipped %q, %d bytes of data, size %d; want it listed as over the cap", f.Skipped, len(f.Data), f.Size)
	}
	if _, ok := byName["link"]; ok {
		t.Errorf("a symbolic link was returned: %+v", byName["link"])
	}
	if strings.Contains(res.Stderr, "non-interactive") {
		t.Errorf("stderr: got %q, want no warning from plt.show()", res.Stderr)
	}
}

func names(fs []OutputFile) []string {
	var n []string
	for _, f := range fs {
		n = append(n, f.Name)
	}
	return n
}

func TestProgress(t *testing.T) {
	l := testLauncher(t, Options{})
	var mu sync.Mutex
	var got []Progress
	res, err := l.Run(t.Context(), Job{
		Code: "import time\nfor i in range(4):\n    print('step', i, flush=True)\n    time.sleep(0.7)",
		Progress: func(p Progress) {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		},
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("got %d progress reports, want at least 2", len(got))
	}
	last := got[len(got)-1]
	if last.OutputBytes == 0 || !strings.Contains(last.Tail, "step") || last.Elapsed < time.Second {
		t.Errorf("last progress: got %+v, want output bytes, a tail with 'step', and elapsed time", last)
	}
}

// TestQueueTimeNotCounted: a job that waited for a slot longer than its own timeout
// still gets its whole timeout once it runs.
func TestQueueTimeNotCounted(t *testing.T) {
	l := testLauncher(t, Options{MaxConcurrent: 1, MaxQueue: 1, PoolSize: -1})
	first := make(chan error, 1)
	go func() {
		_, err := l.Run(context.Background(), Job{Code: "import time; time.sleep(4)"})
		first <- err
	}()
	time.Sleep(500 * time.Millisecond) // the first holds the only slot
	res, err := l.Run(t.Context(), Job{Code: "print('ran')", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut || res.Stdout != "ran\n" {
		t.Errorf("queued job: got timed_out %v, stdout %q; want it to run to the end", res.TimedOut, res.Stdout)
	}
	if res.QueueWait < 2*time.Second {
		t.Errorf("queue wait: got %v, want longer than the job's own 2 s timeout", res.QueueWait)
	}
	if err := <-first; err != nil {
		t.Error(err)
	}
}
