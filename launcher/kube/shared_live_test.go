package kube

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

func testHandle() string {
	var b [24]byte
	rand.Read(b[:])
	return "sess_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// sharedPods lists the shared session pods of handle not being deleted.
func sharedPods(t *testing.T, admin clients, handle string) []string {
	t.Helper()
	list, err := admin.CoreV1().Pods(sandboxNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: backend.LabelSessionKey + "=" + SessionKey(handle)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// replica drives a SessionStore with its launcher as a server does (mcpserver's
// sessions.go: create, start, release; claim, call, release or restart), so that the
// live tests below exercise the store's pods and claims with real sandboxes.
type replica struct {
	*SessionStore
	l *launcher.Launcher
}

// Create starts handle's session for owner, idle for idle, ending at so.Expires.
func (r replica) Create(ctx context.Context, handle, owner string, idle time.Duration, so launcher.SessionOptions) (SessionInfo, error) {
	c, err := r.SessionStore.Create(ctx, handle, owner, backend.SessionRecord{Idle: idle, Expires: so.Expires})
	if err != nil {
		return SessionInfo{}, err
	}
	exp, err := r.start(ctx, c, so)
	return SessionInfo{ExpiresAt: exp}, err
}

func (r replica) start(ctx context.Context, c backend.SessionClaim, so launcher.SessionOptions) (time.Time, error) {
	so.Labels, so.Annotations = c.Labels, c.Annotations
	a, err := r.l.OpenAttached(ctx, so)
	if err != nil {
		return time.Time{}, err
	}
	c.Sandbox = a.ID()
	exp, err := r.Release(context.WithoutCancel(ctx), c)
	if err == nil && exp.IsZero() {
		err = errors.New("the session's pod went away")
	}
	if err != nil {
		a.Close()
	}
	return exp, err
}

// Exec runs job in handle's session for owner.
func (r replica) Exec(ctx context.Context, handle, owner string, job launcher.Job) (launcher.Result, SessionInfo, error) {
	c, err := r.Claim(ctx, handle, owner, job.Timeout)
	if err != nil {
		return launcher.Result{}, SessionInfo{}, err
	}
	info := SessionInfo{Count: c.Record.Count, ExpiresAt: c.Record.ExpiresAt()}
	res, err := r.l.AttachSession(c.Sandbox).Exec(ctx, job)
	var exp time.Time
	if res.SessionGone() {
		n, rerr := r.Restart(context.WithoutCancel(ctx), c)
		if rerr == nil {
			exp, rerr = r.start(context.WithoutCancel(ctx), n, launcher.SessionOptions{Expires: n.Record.Expires, Memory: n.Memory})
		}
		if rerr != nil {
			r.End(ctx, n, "ended: its interpreter was lost and a new one could not start")
		}
	} else {
		exp, _ = r.Release(context.WithoutCancel(ctx), c)
	}
	if !exp.IsZero() {
		info.ExpiresAt = exp
	}
	return res, info, err
}

// TestLiveSharedSession: two replicas (two launchers of different instances, each with
// its SessionStore, as the server's ServiceAccount, on one namespace) serve one session
// alternately: x = 41 on A, print(x + 1) on B; a call on A makes a concurrent one on B
// busy (the claim's compare-and-swap); another identity is refused on both, with the
// answer of a handle that does not exist; close on B, then A finds no session; B's
// sweeper ends a session A made once it is idle. No label or annotation holds the handle
// or the identity, and no pod is left.
func TestLiveSharedSession(t *testing.T) {
	liveSharedSession(t, Options{}, launcher.Options{})
}

// TestLiveGVisorSharedSession: the same under the RuntimeClass gvisor (the OOM kill of
// a call that allocates step by step takes the cell alone there too).
func TestLiveGVisorSharedSession(t *testing.T) {
	liveSharedSession(t, Options{SeccompProfile: gvisorProfile(t)}, launcher.Options{Runtime: gvisorRuntimeClass, Pids: gvisorPids})
}

func liveSharedSession(t *testing.T, kopts Options, opts launcher.Options) {
	oa, ob := opts, opts
	oa.Instance, ob.Instance = testInstance(t)+"-a", testInstance(t)+"-b"
	la, ba, admin := testLauncherWith(t, kopts, oa)
	lb, bb, _ := testLauncherWith(t, kopts, ob)
	log := zerolog.New(zerolog.NewTestWriter(t))
	A, B := replica{NewSessionStore(ba, log), la}, replica{NewSessionStore(bb, log), lb}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	handle, owner := testHandle(), "oauth https://issuer.example alice"

	t0 := time.Now()
	if _, err := A.Create(ctx, handle, owner, time.Minute, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("creating on A: %v", err)
	}
	t.Logf("created on A in %s", time.Since(t0))
	names := sharedPods(t, admin, handle)
	if len(names) != 1 {
		t.Fatalf("session pods: %v, want one", names)
	}
	pod, err := admin.CoreV1().Pods(sandboxNamespace).Get(ctx, names[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].StdinOnce {
		t.Errorf("a shared session's pod has stdinOnce: its stdin would end with the first attach")
	}
	secret := strings.TrimPrefix(handle, "sess_")
	for _, m := range []map[string]string{pod.Labels, pod.Annotations} {
		for k, v := range m {
			if strings.Contains(v, secret) || strings.Contains(v, "alice") {
				t.Errorf("%s=%q holds the handle or the identity", k, v)
			}
		}
	}

	run := func(s replica, who, code string, timeout time.Duration) (launcher.Result, SessionInfo) {
		t.Helper()
		t0 := time.Now()
		res, info, err := s.Exec(ctx, handle, owner, launcher.Job{Code: code, Timeout: timeout})
		if err != nil {
			t.Fatalf("%s: exec %q: %v", who, code, err)
		}
		t.Logf("%s: %q in %s", who, code, time.Since(t0))
		return res, info
	}
	res, info := run(A, "A", "x = 41", 30*time.Second)
	wantLiveState(t, res, launcher.SessionKept, "")
	if info.Count != 1 {
		t.Errorf("count on A: %d, want 1", info.Count)
	}
	res, info = run(B, "B", "print(x + 1)", 30*time.Second)
	wantLiveState(t, res, launcher.SessionKept, "42\n")
	if info.Count != 2 || time.Until(info.ExpiresAt) < 50*time.Second {
		t.Errorf("on B: count %d, expires at %s; want 2, a minute from now", info.Count, info.ExpiresAt)
	}
	// A timeout rolls back on B; A sees the state from before it.
	res, _ = run(B, "B", "x = 0\nwhile True: pass", 2*time.Second)
	if !res.TimedOut || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("timeout on B: timed out %v, state %q (stderr %q), want rolled_back", res.TimedOut, res.SessionState, res.Stderr)
	}
	res, _ = run(A, "A", "print(x)", 30*time.Second)
	wantLiveState(t, res, launcher.SessionKept, "41\n")

	// An OOM kill of a call on B (allocating step by step: the kernel takes the cell,
	// never the holder) rolls back; A sees the state from before it.
	res, _ = run(B, "B", "x = 1\nc = []\nwhile True: c.append(b'\\1' * (8 << 20))", 30*time.Second)
	if !res.OOMKilled || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("oom on B: oom %v, state %q (exit %d, stderr %q), want true, rolled_back", res.OOMKilled, res.SessionState, res.ExitCode, res.Stderr)
	}
	res, _ = run(A, "A", "print(x)", 30*time.Second)
	wantLiveState(t, res, launcher.SessionKept, "41\n")

	// A call on A whose client gives up (an infinite loop, cancelled after 1 s) is killed
	// and its claim released: B's next call runs at once, on the state from before it.
	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(time.Second, ccancel)
	res, _, err = A.Exec(cctx, handle, owner, launcher.Job{Code: "x = 0\nwhile True: pass", Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("cancelled call on A: %v, state %q; want context.Canceled, rolled_back", err, res.SessionState)
	}
	res, _ = run(B, "B", "print(x)", 10*time.Second)
	wantLiveState(t, res, launcher.SessionKept, "41\n")

	// Busy across replicas.
	done := make(chan error, 1)
	go func() {
		res, _, err := A.Exec(ctx, handle, owner, launcher.Job{Code: "import time\ntime.sleep(4)\nprint('first')", Timeout: 30 * time.Second})
		if err == nil && res.Stdout != "first\n" {
			err = errors.New("stdout " + res.Stdout)
		}
		done <- err
	}()
	time.Sleep(2500 * time.Millisecond)
	if _, _, err := B.Exec(ctx, handle, owner, launcher.Job{Code: "print('second')", Timeout: 10 * time.Second}); !errors.Is(err, launcher.ErrSessionBusy) {
		t.Errorf("B while A runs a call: got %v, want ErrSessionBusy", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("A's call: %v", err)
	}

	// A lost interpreter on A: the session starts again, empty, in a new pod, under the
	// same handle and count, and B serves it.
	before := sharedPods(t, admin, handle)
	res, info = run(A, "A", "import os\nos.kill(os.getppid(), 9)\nos._exit(3)", 30*time.Second)
	if res.SessionState != launcher.SessionLost || info.Count != 10 {
		t.Fatalf("killing the holder on A: state %q, count %d (stderr %q), want lost, 10", res.SessionState, info.Count, res.Stderr)
	}
	if after := sharedPods(t, admin, handle); len(after) != 1 || slices.Equal(after, before) {
		t.Errorf("session pods after the loss: %v (before %v), want one new pod", after, before)
	}
	res, info = run(B, "B", "print('x' in globals())", 30*time.Second)
	wantLiveState(t, res, launcher.SessionKept, "False\n")
	if info.Count != 11 {
		t.Errorf("count after the restart: %d, want 11", info.Count)
	}

	// Another identity: the answer of a handle that never existed, on both.
	for _, s := range []replica{A, B} {
		if _, _, err := s.Exec(ctx, handle, "oauth https://issuer.example mallory", launcher.Job{Code: "print(x)"}); !errors.Is(err, ErrSessionGone) {
			t.Errorf("another identity: got %v, want ErrSessionGone", err)
		}
		if closed, err := s.Close(ctx, handle, "oauth https://issuer.example mallory"); closed || err != nil {
			t.Errorf("another identity's close: %v, %v; want false, nil", closed, err)
		}
		if _, _, err := s.Exec(ctx, testHandle(), owner, launcher.Job{Code: "print(x)"}); !errors.Is(err, ErrSessionGone) {
			t.Errorf("an unknown handle: got %v, want ErrSessionGone", err)
		}
	}

	// Close on B; A finds nothing.
	if closed, err := B.Close(ctx, handle, owner); !closed || err != nil {
		t.Fatalf("close on B: %v, %v", closed, err)
	}
	if _, _, err := A.Exec(ctx, handle, owner, launcher.Job{Code: "print(x)"}); !errors.Is(err, ErrSessionGone) {
		t.Errorf("A after close on B: got %v, want ErrSessionGone", err)
	}
	// B, which closed it, says so to its owner; to another identity, nothing.
	if _, _, err := B.Exec(ctx, handle, owner, launcher.Job{Code: "print(x)"}); !errors.Is(err, ErrSessionGone) || !strings.Contains(err.Error(), "closed by session_close") {
		t.Errorf("B after its close: got %v, want ErrSessionGone saying closed by session_close", err)
	}
	if _, _, err := B.Exec(ctx, handle, "oauth https://issuer.example mallory", launcher.Job{Code: "print(x)"}); err == nil || err.Error() != ErrSessionGone.Error() {
		t.Errorf("another identity after the close: got %v, want the bare ErrSessionGone", err)
	}
	if closed, err := A.Close(ctx, handle, owner); closed || err != nil {
		t.Errorf("closing again on A: %v, %v; want false, nil", closed, err)
	}
	if left := sharedPods(t, admin, handle); len(left) != 0 {
		t.Errorf("pods left after close: %v", left)
	}

	// Idle expiry by the other replica's sweeper.
	h2 := testHandle()
	// An idle timeout of 5 s: the sweep right after the creation returned (its release
	// starts the idle clock) comes well within it, even on a loaded machine.
	if _, err := A.Create(ctx, h2, owner, 5*time.Second, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("creating a second session on A: %v", err)
	}
	if n, err := B.Sweep(ctx); n != 0 || err != nil {
		t.Errorf("sweep of a fresh session: %d, %v; want 0", n, err)
	}
	time.Sleep(5500 * time.Millisecond)
	if all, owned, err := A.Count(ctx, owner); all != 1 || owned != 1 || err != nil {
		t.Errorf("count on A: %d, %d, %v; want 1, 1", all, owned, err)
	}
	if all, owned, err := B.Count(ctx, "oauth https://issuer.example mallory"); all != 1 || owned != 0 || err != nil {
		t.Errorf("count on B for another identity: %d, %d, %v; want 1, 0", all, owned, err)
	}
	if n, err := B.Sweep(ctx); n != 1 || err != nil {
		t.Errorf("sweep on B of A's idle session: %d, %v; want 1", n, err)
	}
	if _, _, err := B.Exec(ctx, h2, owner, launcher.Job{Code: "print(1)"}); err == nil || !strings.Contains(err.Error(), "expired: it was idle for more than 5s") {
		t.Errorf("B after sweeping the idle session: got %v, want it to say expired, idle", err)
	}
	if left := sharedPods(t, admin, h2); len(left) != 0 {
		t.Errorf("pods left after the sweep: %v", left)
	}
}
