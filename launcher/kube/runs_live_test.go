package kube

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// runReplica drives a RunStore with its launcher as a server does with background runs:
// start (a pod with the store's labels and annotations, the call kept in it), wait
// (fetch from the pod, record the end), cancel (kill, fetch the end, record it).
type runReplica struct {
	*RunStore
	l *launcher.Launcher
}

func (r runReplica) Start(ctx context.Context, handle, owner string, job launcher.Job) error {
	labels, ann := r.Create(handle, owner, job.Timeout)
	a, err := r.l.OpenAttached(ctx, launcher.SessionOptions{Labels: labels, Annotations: ann})
	if err != nil {
		return err
	}
	if err := a.Keep(ctx, job); err != nil {
		a.Close()
		return err
	}
	return nil
}

func (r runReplica) Wait(ctx context.Context, handle, owner string) (launcher.Result, launcher.Progress, RunRecord, bool, error) {
	rec, err := r.Get(ctx, handle, owner)
	if err != nil {
		return launcher.Result{}, launcher.Progress{}, rec, false, err
	}
	res, p, done, err := r.l.AttachSession(rec.Sandbox).Fetch(ctx)
	if err == nil && done && rec.Ended.IsZero() {
		rec, err = r.Ended(ctx, rec, false)
	}
	return res, p, rec, done, err
}

func (r runReplica) Cancel(ctx context.Context, handle, owner string) (bool, error) {
	rec, err := r.Get(ctx, handle, owner)
	if err != nil || !rec.Ended.IsZero() {
		return false, err
	}
	a := r.l.AttachSession(rec.Sandbox)
	_, _, done, err := a.Kill(ctx)
	for end := time.Now().Add(10 * time.Second); err == nil && !done && time.Now().Before(end); {
		time.Sleep(200 * time.Millisecond)
		_, _, done, err = a.Fetch(ctx)
	}
	if err != nil || !done {
		return false, errors.Join(err, errors.New("the run did not end after its kill"))
	}
	_, err = r.Ended(ctx, rec, true)
	return true, err
}

// waitDone polls r until handle's run has ended.
func waitDone(t *testing.T, ctx context.Context, r runReplica, handle, owner string) (launcher.Result, RunRecord) {
	t.Helper()
	for {
		res, _, rec, done, err := r.Wait(ctx, handle, owner)
		if err != nil {
			t.Fatalf("waiting for the run: %v", err)
		}
		if done {
			return res, rec
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestLiveRunAcrossReplicas: a background run started on replica A (a launcher of its own
// instance, with its RunStore) is followed from replica B: its progress (the tail of its
// output) while it runs, after A has gone away, then its result and files, as often as
// asked, and from a third replica started afterwards (a restart loses no run). Another
// identity's handle is not found on any replica; no label or annotation holds the handle,
// the identity or the output. A cancel from B ends a run A started; a timeout and an OOM
// kill come back as results; a result past its TTL is swept by B, which then answers
// "expired", and its pod is gone.
func TestLiveRunAcrossReplicas(t *testing.T) {
	liveRunAcrossReplicas(t, Options{}, launcher.Options{})
}

// TestLiveGVisorRunAcrossReplicas: the same under the RuntimeClass gvisor (its OOM kill of
// a call that allocates step by step takes the call alone, and the kept result stays).
func TestLiveGVisorRunAcrossReplicas(t *testing.T) {
	liveRunAcrossReplicas(t, Options{SeccompProfile: gvisorProfile(t)}, launcher.Options{Runtime: gvisorRuntimeClass, Pids: gvisorPids})
}

func liveRunAcrossReplicas(t *testing.T, kopts Options, o launcher.Options) {
	// A quarter of a CPU each: a kept result holds its pod, and the test node has two.
	o.Memory, o.CPUs = 256<<20, 0.25
	oa, ob, oc := o, o, o
	oa.Instance, ob.Instance, oc.Instance = testInstance(t)+"-a", testInstance(t)+"-b", testInstance(t)+"-c"
	la, ba, admin := testLauncherWith(t, kopts, oa)
	lb, bb, _ := testLauncherWith(t, kopts, ob)
	log := zerolog.New(zerolog.NewTestWriter(t))
	ttl := time.Hour
	A, B := runReplica{NewRunStore(ba, log, ttl), la}, runReplica{NewRunStore(bb, log, ttl), lb}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	owner, mallory := "oauth https://issuer.example alice", "oauth https://issuer.example mallory"
	var handles []string
	t.Cleanup(func() { // before the launchers' own checks that no pod is left
		for _, h := range handles {
			if err := B.Forget(context.Background(), h, owner); err != nil && !errors.Is(err, ErrRunNotFound) {
				t.Errorf("removing a run's pod: %v", err)
			}
		}
	})
	start := func(code string, timeout time.Duration) string {
		t.Helper()
		h := testHandle()
		handles = append(handles, h)
		t0 := time.Now()
		if err := A.Start(ctx, h, owner, launcher.Job{Code: code, Timeout: timeout}); err != nil {
			t.Fatalf("starting a run on A: %v", err)
		}
		t.Logf("started on A in %s", time.Since(t0))
		return h
	}

	h := start("import sys, time\nprint('first secret line')\nsys.stdout.flush()\ntime.sleep(6)\n"+
		"print('done')\nopen('/tmp/outputs/r.txt', 'w').write('file data')", time.Minute)
	// Progress from B while it runs.
	var p launcher.Progress
	for end := time.Now().Add(30 * time.Second); ; {
		t0 := time.Now()
		_, pp, _, done, err := B.Wait(ctx, h, owner)
		t.Logf("a look at the running run on B: %s", time.Since(t0))
		if err != nil || done {
			t.Fatalf("B while the run runs: done %v, %v", done, err)
		}
		if p = pp; strings.Contains(p.StdoutTail, "first secret line") || time.Now().After(end) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(p.StdoutTail, "first secret line") || p.OutputBytes != int64(len("first secret line\n")) {
		t.Errorf("progress on B: %+v, want the first line in the stdout tail", p)
	}
	// What the pod's metadata holds: neither the handle, nor the identity, nor output.
	rec, err := B.Get(ctx, h, owner)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods(sandboxNamespace).Get(ctx, rec.Sandbox, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[LabelRun] != "1" || pod.Spec.Containers[0].StdinOnce {
		t.Errorf("run pod: labels %v, stdinOnce %v; want %s=1, false", pod.Labels, pod.Spec.Containers[0].StdinOnce, LabelRun)
	}
	for _, m := range []map[string]string{pod.Labels, pod.Annotations} {
		for k, v := range m {
			if strings.Contains(v, strings.TrimPrefix(h, "sess_")) || strings.Contains(v, "alice") || strings.Contains(v, "secret") {
				t.Errorf("%s=%q holds the handle, the identity or output", k, v)
			}
		}
	}
	// A goes away (its launcher closes: a replica's shutdown); the run goes on.
	cctx, ccancel := context.WithTimeout(ctx, time.Minute)
	if err := la.Close(cctx); err != nil {
		t.Errorf("closing A: %v", err)
	}
	ccancel()
	res, rec := waitDone(t, ctx, B, h, owner)
	if res.Stdout != "first secret line\ndone\n" || res.ExitCode != 0 || res.TimedOut || len(res.Files) != 1 || string(res.Files[0].Data) != "file data" {
		t.Errorf("result on B: %+v", res)
	}
	if rec.Ended.IsZero() || rec.Canceled {
		t.Errorf("record after the end: %+v, want ended, not cancelled", rec)
	}
	// A replica started afterwards gets the same result.
	lc, bc, _ := testLauncherWith(t, kopts, oc)
	C := runReplica{NewRunStore(bc, log, ttl), lc}
	t0 := time.Now()
	res2, _, rec2, done, err := C.Wait(ctx, h, owner)
	t.Logf("a replica's first look at an ended run (lookup, attach, fetch, detach): %s", time.Since(t0))
	if err != nil || !done || res2.Stdout != res.Stdout || len(res2.Files) != 1 || !rec2.Ended.Equal(rec.Ended) {
		t.Errorf("result on C: %+v, %+v, %v, %v; want B's", res2, rec2, done, err)
	}
	for _, r := range []runReplica{B, C} {
		if _, _, _, _, err := r.Wait(ctx, h, mallory); !errors.Is(err, ErrRunNotFound) {
			t.Errorf("another identity's wait: %v, want ErrRunNotFound", err)
		}
		if _, err := r.Cancel(ctx, h, mallory); !errors.Is(err, ErrRunNotFound) {
			t.Errorf("another identity's cancel: %v, want ErrRunNotFound", err)
		}
		if _, _, _, _, err := r.Wait(ctx, testHandle(), owner); !errors.Is(err, ErrRunNotFound) {
			t.Errorf("an unknown handle: %v, want ErrRunNotFound", err)
		}
	}
	if was, err := C.Cancel(ctx, h, owner); was || err != nil {
		t.Errorf("cancelling an ended run: %v, %v; want false, nil", was, err)
	}

	// The rest start on B (A has gone) and are followed on C.
	A = B
	h = start("import time\nprint('before', flush=True)\ntime.sleep(600)", 5*time.Minute)
	time.Sleep(time.Second)
	if was, err := C.Cancel(ctx, h, owner); !was || err != nil {
		t.Fatalf("cancel on C: %v, %v", was, err)
	}
	res, rec = waitDone(t, ctx, B, h, owner)
	if !rec.Canceled || res.Signal != 9 || !strings.Contains(res.Stdout, "before") {
		t.Errorf("cancelled run on B: %+v, %+v; want cancelled, SIGKILL, its output", res, rec)
	}

	h = start("while True: pass", 2*time.Second)
	res, _ = waitDone(t, ctx, C, h, owner)
	if !res.TimedOut || res.ExitCode != 137 || res.OOMKilled {
		t.Errorf("a run past its timeout: %+v, want timed out, 137", res)
	}

	h = start("c = []\nwhile True: c.append(b'\\1' * (8 << 20))", time.Minute)
	res, _ = waitDone(t, ctx, C, h, owner)
	if !res.OOMKilled || res.TimedOut {
		t.Errorf("a run past its memory: %+v, want OOM-killed", res)
	}

	// A pod that ends under its run (here: its container killed from the node, as an
	// eviction or a lost node would end it) loses the run, and says so. The node's
	// containerd is the test cluster's own (scripts/k8s/env.sh: KSTATE).
	if kstate := os.Getenv("MCP_EXEC_TEST_KSTATE"); kstate != "" {
		h = start("import time\ntime.sleep(600)", 5*time.Minute)
		rec, err = C.Get(ctx, h, owner)
		if err == nil {
			pod, err = admin.CoreV1().Pods(sandboxNamespace).Get(ctx, rec.Sandbox, metav1.GetOptions{})
		}
		if err != nil || len(pod.Status.ContainerStatuses) == 0 {
			t.Fatalf("the run's pod: %v", err)
		}
		cid := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
		if out, err := exec.CommandContext(ctx, "ctr", "-a", kstate+"/containerd.sock", "-n", "k8s.io", "task", "kill", "-s", "KILL", cid).CombinedOutput(); err != nil {
			t.Fatalf("killing the run's container: %v: %s", err, out)
		}
		for end := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
			_, _, _, _, err := C.Wait(ctx, h, owner)
			if errors.Is(err, ErrRunLost) {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("wait on a run whose pod ended: %v, want ErrRunLost", err)
			}
		}
	}

	// TTL: B's sweep removes what is past it, then answers "expired".
	short := runReplica{NewRunStore(bb, log, time.Second), lb}
	time.Sleep(1100 * time.Millisecond)
	if n, err := short.Sweep(ctx); n != len(handles) || err != nil {
		t.Errorf("sweep with a TTL of 1 s: %d, %v; want %d", n, err, len(handles))
	}
	if _, _, _, _, err := short.Wait(ctx, h, owner); !errors.Is(err, ErrRunExpired) {
		t.Errorf("wait after the sweep: %v, want ErrRunExpired", err)
	}
	if _, _, _, _, err := short.Wait(ctx, h, mallory); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("another identity after the sweep: %v, want ErrRunNotFound", err)
	}
	if all, _, err := C.Count(ctx, owner); all != 0 || err != nil {
		t.Errorf("runs left: %d, %v", all, err)
	}
}

// TestLiveRunLanguages: background runs in bash and JavaScript, started on replica A and
// fetched from B: their output, files and exit code as a one-shot call's; a bash run and
// a JavaScript run past their timeout are killed by the bootstrap and say so.
func TestLiveRunLanguages(t *testing.T) {
	o := launcher.Options{Memory: 256 << 20, CPUs: 0.25}
	oa, ob := o, o
	oa.Instance, ob.Instance = testInstance(t)+"-a", testInstance(t)+"-b"
	la, ba, _ := testLauncherWith(t, Options{}, oa)
	lb, bb, _ := testLauncherWith(t, Options{}, ob)
	log := zerolog.New(zerolog.NewTestWriter(t))
	A, B := runReplica{NewRunStore(ba, log, time.Hour), la}, runReplica{NewRunStore(bb, log, time.Hour), lb}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	owner := "oauth https://issuer.example alice"
	var handles []string
	t.Cleanup(func() {
		for _, h := range handles {
			if err := B.Forget(context.Background(), h, owner); err != nil && !errors.Is(err, ErrRunNotFound) {
				t.Errorf("removing a run's pod: %v", err)
			}
		}
	})
	start := func(job launcher.Job) string {
		t.Helper()
		h := testHandle()
		handles = append(handles, h)
		if err := A.Start(ctx, h, owner, job); err != nil {
			t.Fatalf("starting a %s run on A: %v", job.Language, err)
		}
		return h
	}
	hb := start(launcher.Job{Language: "bash", Timeout: time.Minute, Stdin: "in\n",
		Code: "read -r l; echo \"bash $l ${BASH_VERSINFO[0]}\" | cut -d' ' -f1,2; echo err >&2; echo f > /tmp/outputs/b.txt; exit 3"})
	hj := start(launcher.Job{Language: "javascript", Timeout: time.Minute,
		Code: "await new Promise((r) => setTimeout(r, 10)); console.log('js', typeof require); require('fs').writeFileSync('/tmp/outputs/j.txt', 'j'); process.exitCode = 4"})
	ht := start(launcher.Job{Language: "bash", Timeout: 2 * time.Second, Code: "echo before; while :; do :; done"})
	hjt := start(launcher.Job{Language: "javascript", Timeout: 2 * time.Second, Code: "console.log('before'); for (;;) {}"})

	res, _ := waitDone(t, ctx, B, hb, owner)
	if res.Stdout != "bash in\n" || res.Stderr != "err\n" || res.ExitCode != 3 || len(res.Files) != 1 || string(res.Files[0].Data) != "f\n" {
		t.Errorf("bash run: stdout %q, stderr %q, exit %d, files %+v; want \"bash in\", err, 3, b.txt", res.Stdout, res.Stderr, res.ExitCode, res.Files)
	}
	res, _ = waitDone(t, ctx, B, hj, owner)
	if res.Stdout != "js function\n" || res.ExitCode != 4 || len(res.Files) != 1 || res.Files[0].Name != "j.txt" {
		t.Errorf("javascript run: stdout %q, stderr %q, exit %d, files %+v; want \"js function\", 4, j.txt", res.Stdout, res.Stderr, res.ExitCode, res.Files)
	}
	res, _ = waitDone(t, ctx, B, ht, owner)
	if !res.TimedOut || res.Stdout != "before\n" {
		t.Errorf("bash run past its timeout: timed out %v, stdout %q, stderr %q; want true, before", res.TimedOut, res.Stdout, res.Stderr)
	}
	res2, _ := waitDone(t, ctx, B, hjt, owner)
	if !res2.TimedOut || res2.Stdout != "before\n" {
		t.Errorf("javascript run past its timeout: timed out %v, stdout %q, stderr %q; want true, before", res2.TimedOut, res2.Stdout, res2.Stderr)
	}
	// A run is no session's call, whatever its language: the bootstrap's kept call
	// says what a session would keep (JavaScript's "lost"), and the result leaves it out.
	for _, r := range []launcher.Result{res, res2} {
		if r.SessionState != "" || r.LostLanguage != "" || r.ExitCode != 137 || strings.Contains(r.Stderr, "[mcp-exec]") {
			t.Errorf("a run killed at its timeout: state %q (%q), exit %d, stderr %q; want no session state, 137, no note", r.SessionState, r.LostLanguage, r.ExitCode, r.Stderr)
		}
	}
}
