package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

var _ launcher.Backend = (*Backend)(nil)
var _ launcher.LimitsHinter = (*Backend)(nil)
var _ launcher.SeccompHinter = (*Backend)(nil)

const testImage = "mcp-exec/python-sandbox:v1"

func testInstance(t testing.TB) string {
	s := "kube-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	return strings.TrimRight(s[:min(len(s), 60)], "-.")
}

// testLauncher is a launcher on the Kubernetes backend of the test cluster, acting as the
// server's ServiceAccount. At its end it is closed and no pod of its instance may be left.
func testLauncher(t testing.TB, opts launcher.Options) (*launcher.Launcher, *Backend, clients) {
	t.Helper()
	return testLauncherWith(t, Options{}, opts)
}

// testLauncherWith is testLauncher with the backend's own options.
func testLauncherWith(t testing.TB, kopts Options, opts launcher.Options) (*launcher.Launcher, *Backend, clients) {
	t.Helper()
	be, admin := liveBackend(t, kopts)
	return testLauncherOn(t, be, admin, opts), be, admin
}

// testLauncherOn is testLauncher on be, a live backend or one a test wrapped.
func testLauncherOn(t testing.TB, be launcher.Backend, admin clients, opts launcher.Options) *launcher.Launcher {
	t.Helper()
	if opts.Image == "" {
		opts.Image = testImage
	}
	if opts.Instance == "" {
		opts.Instance = testInstance(t)
	}
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	l, err := launcher.New(be, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		t.Fatalf("check: %v", err)
	}
	if _, err := l.Reap(ctx); err != nil {
		t.Fatalf("reaping leftovers: %v", err)
	}
	l.StartPool()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("closing launcher: %v", err)
		}
		assertNoPods(t, admin, opts.Instance)
	})
	return l
}

func instancePods(t testing.TB, admin clients, instance string) []string {
	t.Helper()
	list, err := admin.CoreV1().Pods(sandboxNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: backend.LabelInstance + "=" + instance})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// assertNoPods fails if a pod of instance is still in the API server a few seconds on (the
// launcher removes pods in the background).
func assertNoPods(t testing.TB, admin clients, instance string) {
	t.Helper()
	var left []string
	for i := 0; i < 100; i++ {
		if left = instancePods(t, admin, instance); len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("pods left with instance %q: %v", instance, left)
}

func TestLauncherRuns(t *testing.T) {
	l, _, _ := testLauncher(t, launcher.Options{})
	tests := []struct {
		name, code, stdin   string
		stdout, stderr      string
		exit                int
		files               []launcher.File
		wantFile, wantFileB string
	}{
		{name: "print", code: "print(1)", stdout: "1\n"},
		{name: "exit", code: "import sys; print('e', file=sys.stderr); sys.exit(3)", stderr: "e\n", exit: 3},
		{name: "stdin", code: "import sys; print(sys.stdin.read()[::-1])", stdin: "abc", stdout: "cba\n"},
		{name: "files", code: "import os; print(open('in.txt').read()); os.makedirs('outputs', exist_ok=True); open('outputs/o.txt','w').write('out')",
			files: []launcher.File{{Name: "in.txt", Data: []byte("hello")}}, stdout: "hello\n", wantFile: "o.txt", wantFileB: "out"},
		{name: "user", code: "import os; print(os.getuid(), os.getgid())", stdout: "65532 65532\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := l.Run(t.Context(), launcher.Job{Code: tt.code, Stdin: tt.stdin, Files: tt.files, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != tt.stdout || res.Stderr != tt.stderr || res.ExitCode != tt.exit {
				t.Errorf("got stdout %q stderr %q exit %d, want %q %q %d", res.Stdout, res.Stderr, res.ExitCode, tt.stdout, tt.stderr, tt.exit)
			}
			if tt.wantFile != "" {
				if len(res.Files) != 1 || res.Files[0].Name != tt.wantFile || string(res.Files[0].Data) != tt.wantFileB {
					t.Errorf("files: got %+v, want %s=%q", res.Files, tt.wantFile, tt.wantFileB)
				}
			}
		})
	}
}

// TestLauncherPool: warm pods wait, created and attached, before any job; each job takes one,
// which is then deleted (used once), and the pool refills with new pods. With node started
// ahead in them (Prestart): a JavaScript call runs in the node that waited (boot.py's
// _ahead: it has --preserve-symlinks, which a node started after its code has only with
// tools), one with tools too (its stdin and the tool's reply through the attach), and a
// Python call beside them runs with no node left.
func TestLauncherPool(t *testing.T) {
	l, _, admin := testLauncher(t, launcher.Options{PoolSize: 2, Prestart: []string{"javascript"}})
	inst := l.Options().Instance
	waitPods := func(n int) []string {
		t.Helper()
		var pods []string
		for i := 0; i < 600; i++ {
			if pods = instancePods(t, admin, inst); len(pods) == n && l.PoolStats().Idle == n {
				return pods
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("pool: got pods %v and %+v, want %d ready", pods, l.PoolStats(), n)
		return nil
	}
	seen := map[string]bool{}
	for _, p := range waitPods(2) {
		seen[p] = true
	}
	tools := &launcher.Tools{
		Catalog: []byte(`{"servers":[{"name":"echo","module":"echo","tools":[
 {"name":"echo","function":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}]}`),
		Serve: func(_ context.Context, req []byte, _ int) []byte {
			return []byte(`{"result":{"content":[],"structuredContent":{"text":"hi"}}}`)
		},
	}
	const node = "import { hostname } from 'node:os';\nimport { readFileSync } from 'node:fs';\n" +
		"console.log(hostname(), process.execArgv.includes('--preserve-symlinks') ? 'ahead' : 'cold', JSON.stringify(readFileSync(0, 'utf8')))\n"
	for i, job := range []struct {
		job  launcher.Job
		want string
	}{
		{launcher.Job{Language: "javascript", Code: node, Stdin: "in"}, "sandbox ahead \"in\"\n"},
		{launcher.Job{Language: "javascript", Code: "import { echo } from 'mcptools';\n" + node + "console.log((await echo.echo({ text: 'hi' })).text)",
			Stdin: "the caller's", Tools: tools}, "sandbox ahead \"the caller's\"\nhi\n"},
		{launcher.Job{Code: "import os, socket\nprint(socket.gethostname(), sorted(open('/proc/%s/comm' % p).read().strip() for p in os.listdir('/proc') if p.isdigit()))"},
			"sandbox ['python3', 'python3']\n"},
	} {
		job.job.Timeout = 30 * time.Second
		res, err := l.Run(t.Context(), job.job)
		if err != nil || res.Stdout != job.want {
			t.Fatalf("run %d: got %+v, %v; want stdout %q", i, res, err, job.want)
		}
		for _, p := range waitPods(2) {
			seen[p] = true
		}
	}
	// 2 at the start, and one new pod per job: no pod served twice.
	if len(seen) != 5 {
		t.Errorf("distinct pods: got %d, want 5 (2 warm + 1 per job)", len(seen))
	}
}

// TestLauncherTimeout: the timeout kills the program and deletes its pod.
func TestLauncherTimeout(t *testing.T) {
	l, _, admin := testLauncher(t, launcher.Options{})
	s := time.Now()
	res, err := l.Run(t.Context(), launcher.Job{Code: "import time\nprint('start', flush=True)\nwhile True: time.sleep(1)", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 137 || res.Stdout != "start\n" {
		t.Errorf("got %+v, want timed out with exit 137 and the output so far", res)
	}
	t.Logf("timed-out run returned after %v", time.Since(s).Round(time.Millisecond))
	assertNoPods(t, admin, l.Options().Instance)
}

// TestLauncherCancel: a cancelled call's pod is deleted.
func TestLauncherCancel(t *testing.T) {
	l, _, admin := testLauncher(t, launcher.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(4*time.Second, cancel)
	_, err := l.Run(ctx, launcher.Job{Code: "import time; time.sleep(60)", Timeout: 60 * time.Second})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	assertNoPods(t, admin, l.Options().Instance)
}

// TestLauncherPodDeletedMidExec: someone deletes or evicts the pod while its program runs: the
// call ends with a clear error (not a hang, not a made-up result) and nothing is left.
func TestLauncherPodDeletedMidExec(t *testing.T) {
	for _, how := range []string{"delete", "evict"} {
		t.Run(how, func(t *testing.T) {
			l, _, admin := testLauncher(t, launcher.Options{})
			inst := l.Options().Instance
			go func() {
				for i := 0; i < 300; i++ {
					time.Sleep(100 * time.Millisecond)
					if pods := instancePods(t, admin, inst); len(pods) == 1 && containerRunning(admin, pods[0]) {
						// The container runs; let the launcher's start (the gate, the
						// code) end and the program run.
						time.Sleep(2 * time.Second)
						now := metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}
						var err error
						if how == "evict" {
							err = admin.CoreV1().Pods(sandboxNamespace).EvictV1(context.Background(), &policyv1.Eviction{
								ObjectMeta: metav1.ObjectMeta{Name: pods[0], Namespace: sandboxNamespace}, DeleteOptions: &now})
						} else {
							err = admin.CoreV1().Pods(sandboxNamespace).Delete(context.Background(), pods[0], now)
						}
						if err != nil {
							t.Errorf("%s pod %s: %v", how, pods[0], err)
						}
						return
					}
				}
			}()
			s := time.Now()
			res, err := l.Run(t.Context(), launcher.Job{Code: "import time; time.sleep(120)", Timeout: 120 * time.Second})
			if err == nil {
				t.Fatalf("got result %+v, want an error saying the sandbox is gone", res)
			}
			if !strings.Contains(err.Error(), "is gone (deleted from outside, or evicted") {
				t.Errorf("error: got %v, want it to say the pod is gone", err)
			}
			if d := time.Since(s); d > 60*time.Second {
				t.Errorf("the call took %v after its pod was %sd", d, how)
			}
			t.Logf("error: %v", err)
			assertNoPods(t, admin, inst)
		})
	}
}

// containerRunning reports whether the pod's container has started (a pod deleted
// before that fails the start, not the run: "sandbox not found").
func containerRunning(admin clients, name string) bool {
	p, err := admin.CoreV1().Pods(sandboxNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true
		}
	}
	return false
}

// TestLauncherReap: Reap removes this instance's leftover pods and never another instance's.
func TestLauncherReap(t *testing.T) {
	be, admin := liveBackend(t, Options{})
	mine, other := testInstance(t)+"-a", testInstance(t)+"-b"
	mk := func(inst string) string {
		spec := launcher.SpecOf(launcher.Options{Image: testImage, Instance: inst})
		id, err := be.Create(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	mk(mine)
	mk(mine)
	theirs := mk(other)
	t.Cleanup(func() { _ = be.Remove(context.Background(), theirs) })
	l, err := launcher.New(be, launcher.Options{Image: testImage, Instance: mine, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	n, err := l.Reap(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("Reap: got %d, %v; want 2 removed", n, err)
	}
	assertNoPods(t, admin, mine)
	if got := instancePods(t, admin, other); len(got) != 1 || got[0] != theirs {
		t.Errorf("the other instance's pods: got %v, want [%s] untouched", got, theirs)
	}
	_ = l.Close(t.Context())
}

// TestLauncherUnreachable: with the API server unreachable a call is an infrastructure error
// that names it.
func TestLauncherUnreachable(t *testing.T) {
	cfg := adminConfig(t)
	cfg.Host = "https://127.0.0.1:1"
	be, err := New(cfg, Options{Namespace: sandboxNamespace}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l, err := launcher.New(be, launcher.Options{Image: testImage, Instance: testInstance(t), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	if err := l.Check(t.Context()); !errors.Is(err, backend.ErrEngineUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Check: got %v, want ErrEngineUnavailable naming the API server", err)
	}
	_, err = l.Run(t.Context(), launcher.Job{Code: "print(1)", Timeout: 10 * time.Second})
	if !errors.Is(err, backend.ErrEngineUnavailable) || !strings.Contains(err.Error(), "Kubernetes API server") {
		t.Errorf("Run: got %v, want ErrEngineUnavailable naming the Kubernetes API server", err)
	}
}

// TestLauncherLimits: the start-up limits check, run as a pod, finds memory and CPU on the
// container's cgroup and measures the pids limit (the kubelet's podPidsLimit, 128 on the test
// cluster) from inside; a --pids below it is refused, naming podPidsLimit.
func TestLauncherLimits(t *testing.T) {
	l, _, _ := testLauncher(t, launcher.Options{Pids: 128, Memory: 256 << 20, CPUs: 1})
	lim, err := l.MeasureLimits(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("limits seen from a pod: %+v", lim)
	if lim.Memory != 256<<20 || lim.CPUQuota != 100000 || !lim.PidsMeasured || lim.Pids < 100 || lim.Pids > 128 {
		t.Errorf("got %+v, want memory 256 MiB, quota 100000, pids measured between 100 and 128", lim)
	}
	if err := l.VerifyLimits(t.Context()); err != nil {
		t.Errorf("VerifyLimits: %v", err)
	}

	strict, _, _ := testLauncher(t, launcher.Options{Pids: 32, Instance: testInstance(t) + "-strict"})
	err = strict.VerifyLimits(t.Context())
	if !errors.Is(err, launcher.ErrLimitsNotEnforced) || !strings.Contains(err.Error(), "podPidsLimit") || !strings.Contains(err.Error(), "pids (configured 32") {
		t.Errorf("VerifyLimits with --pids 32: got %v, want a refusal naming pids and podPidsLimit", err)
	}
}
