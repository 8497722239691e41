package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/rest"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// liveBackend returns a Backend on the test cluster that acts as the server's ServiceAccount
// (impersonated), so every request it makes must be allowed by docs/deploy/kubernetes' Role.
func liveBackend(t testing.TB, opts Options) (*Backend, clients) {
	t.Helper()
	cfg := adminConfig(t)
	applyBase(t, cfg)
	return newLiveBackend(t, cfg, opts)
}

func newLiveBackend(t testing.TB, cfg *rest.Config, opts Options) (*Backend, clients) {
	if opts.Namespace == "" {
		opts.Namespace = sandboxNamespace
	}
	if opts.PullPolicy == "" {
		opts.PullPolicy = corev1.PullNever // nothing can be pulled on the test cluster
	}
	b, err := New(asServiceAccount(cfg), opts, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	return b, mustClients(cfg)
}

// sealed prefixes a test program (which is not the bootstrap) with what the bootstrap does
// with the start gate's key: its stdout is sealed (an implementation of the keystream of its
// own, seal.go), since the backend unseals every pod's stdout.
func sealed(program string) string {
	return `import io as _io, os as _os, sys as _sys, hashlib as _h
class _Sealed(_io.RawIOBase):
    key, off = _os.read(int(_sys.argv.pop().removeprefix("seal-fd=")), 32), 0
    def writable(self):
        return True
    def write(self, b):
        b, first = bytes(b), self.off >> 16
        ks = b"".join(_h.shake_256(self.key + b"mcp-exec seal v1" + i.to_bytes(8, "big")).digest(65536)
                      for i in range(first, ((self.off + len(b)) >> 16) + 1))
        ks = ks[self.off - (first << 16):][:len(b)]
        out = bytes(x ^ y for x, y in zip(b, ks))
        while out:
            out = out[_os.write(1, out):]
        self.off += len(b)
        return len(b)
_sys.stdout = _io.TextIOWrapper(_io.BufferedWriter(_Sealed()), line_buffering=True)
` + program
}

func liveSpec(t *testing.T, program string) backend.Spec {
	s := testSpec()
	s.Command = []string{"python3", "-I", "-c", sealed(program)}
	s.Labels[backend.LabelInstance] = "kube-test-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(s.Labels[backend.LabelInstance]) > 63 {
		s.Labels[backend.LabelInstance] = s.Labels[backend.LabelInstance][:63]
	}
	return s
}

// runPod creates, starts and attaches one pod, sends stdin, and waits for its streams to end.
func runPod(t *testing.T, b *Backend, spec backend.Spec, stdin string) (id, stdout, stderr string) {
	t.Helper()
	ctx := t.Context()
	id, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Remove(context.Background(), id) })
	var out, errb launchertest.Buffer
	c, err := b.Start(ctx, id, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(stdin)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the pod's streams did not end in 60 s")
	}
	return id, out.String(), errb.String()
}

// TestLivePodRoundTrip runs a program in a pod through attach, as the ServiceAccount: stdin
// arrives and ends, stdout and stderr come back apart, the exit status is read from the pod,
// the pod the API server stored is the hardened one, and Remove leaves nothing.
func TestLivePodRoundTrip(t *testing.T) {
	b, admin := liveBackend(t, Options{})
	prog := `import sys, os
d = sys.stdin.read()
print(d.upper(), end="")
print("err:" + str(os.getuid()), file=sys.stderr)
sys.exit(7)`
	spec := liveSpec(t, prog)
	id, stdout, stderr := runPod(t, b, spec, "hello pod")
	if stdout != "HELLO POD" {
		t.Errorf("stdout: got %q, want %q", stdout, "HELLO POD")
	}
	if stderr != "err:65532\n" {
		t.Errorf("stderr: got %q, want %q", stderr, "err:65532\n")
	}
	var exit backend.Exit
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if exit, err = b.Inspect(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if !exit.Running || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if exit.Running || exit.Code != 7 {
		t.Errorf("exit: got %+v, want code 7", exit)
	}

	// The stored pod is the one PodSpec made (defaulting adds fields, never weakens these).
	pod, err := admin.CoreV1().Pods(sandboxNamespace).Get(t.Context(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := PodSpec(spec, b.opts)
	c, wc := pod.Spec.Containers[0], want.Spec.Containers[0]
	if *c.SecurityContext.ReadOnlyRootFilesystem != true || *c.SecurityContext.AllowPrivilegeEscalation != false ||
		len(c.SecurityContext.Capabilities.Drop) != 1 || *pod.Spec.AutomountServiceAccountToken != false ||
		pod.Spec.DNSPolicy != corev1.DNSNone || !c.Stdin || !c.StdinOnce || c.TTY ||
		pod.Spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("stored pod lost hardening: %+v", pod.Spec)
	}
	if strings.Join(c.Command, " ") != strings.Join(wc.Command, " ") {
		t.Errorf("stored command differs")
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil || v.Projected != nil || v.Secret != nil {
			t.Errorf("stored pod has volume %s of a kind PodSpec never makes: %+v", v.Name, v.VolumeSource)
		}
	}

	if err := b.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(t.Context(), id); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("second Remove: got %v, want ErrNotFound", err)
	}
	left, err := b.List(t.Context(), spec.Labels[backend.LabelInstance])
	if err != nil || len(left) != 0 {
		t.Errorf("List after Remove: got %v, %v; want none", left, err)
	}
}

// TestLivePodNetwork proves from inside a pod on the test cluster that it has no network: only
// lo, and no name resolves. (The NetworkPolicy is not what does it here: the test cluster's CNI
// gives pods nothing but lo and enforces no policy.)
func TestLivePodNetwork(t *testing.T) {
	b, _ := liveBackend(t, Options{})
	prog := `import socket, sys
sys.stdin.read()
ifs = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
print("ifs", ",".join(ifs))
for name in ("kubernetes.default.svc", "example.com"):
    try:
        socket.getaddrinfo(name, 443)
        print("resolved", name)
    except OSError as e:
        print("noresolve", name)
print("resolv", open("/etc/resolv.conf").read().split())`
	_, stdout, stderr := runPod(t, b, liveSpec(t, prog), "")
	for _, want := range []string{"ifs lo\n", "noresolve kubernetes.default.svc\n", "noresolve example.com\n", "'nameserver', '127.0.0.1'"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout: got %q, want it to contain %q (stderr %q)", stdout, want, stderr)
		}
	}
}

// TestLiveDeletedFromOutside: a pod deleted by someone else while attached ends its streams,
// and Inspect says it is gone.
func TestLiveDeletedFromOutside(t *testing.T) {
	b, admin := liveBackend(t, Options{})
	spec := liveSpec(t, `import sys, time; sys.stdin.readline(); print("up", flush=True); time.sleep(300)`)
	id, err := b.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Remove(context.Background(), id) })
	var out launchertest.Buffer
	c, err := b.Start(t.Context(), id, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300 && !strings.Contains(out.String(), "up"); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "up") {
		t.Fatalf("the program did not start: output %q", out.String())
	}
	deleted := time.Now()
	if err := admin.CoreV1().Pods(sandboxNamespace).Delete(t.Context(), id, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("streams still open 60 s after the pod was deleted")
	}
	t.Logf("streams ended %v after the delete", time.Since(deleted).Round(time.Millisecond))
	if _, err := b.Inspect(t.Context(), id); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Inspect: got %v, want ErrNotFound", err)
	}
}

// TestLiveImageMissing: a pod whose image is not on the node fails to start with
// ErrImageMissing, and is removed.
func TestLiveImageMissing(t *testing.T) {
	b, _ := liveBackend(t, Options{})
	spec := liveSpec(t, "print(1)")
	spec.Image = "mcp-exec/no-such-image:v0"
	id, err := b.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), id)
	_, err = b.Start(t.Context(), id, &launchertest.Buffer{}, &launchertest.Buffer{})
	if !errors.Is(err, backend.ErrImageMissing) {
		t.Fatalf("Start: got %v, want ErrImageMissing", err)
	}
}

// TestLiveUnschedulable: a pod no node has room for (it asks for more CPUs than the
// test cluster's node has, as a session pod beside a full warm pool does for one more)
// ends its start after UnschedulableWait with the scheduler's own reason, rather than
// at StartTimeout in silence.
func TestLiveUnschedulable(t *testing.T) {
	b, _ := liveBackend(t, Options{UnschedulableWait: 2 * time.Second, StartTimeout: 20 * time.Second})
	spec := liveSpec(t, "print(1)")
	spec.CPUs = 64
	id, err := b.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), id)
	t0 := time.Now()
	_, err = b.Start(t.Context(), id, &launchertest.Buffer{}, &launchertest.Buffer{})
	if d := time.Since(t0); err == nil || !strings.Contains(err.Error(), "no node can take it") ||
		!strings.Contains(err.Error(), "Insufficient cpu") || d > 10*time.Second {
		t.Fatalf("Start after %v: got %v, want the scheduler's Insufficient cpu after 2 s", d.Round(time.Millisecond), err)
	}
}

// TestLiveUnschedulableScaleUp: an unschedulable pod whose events say that a node
// autoscaler is adding a node for it (an event written here as cluster-autoscaler
// writes it, by the admin) waits past UnschedulableWait, to StartTimeout, and says so:
// the ServiceAccount may list the pod's events, and the API server takes the field
// selector on them (the fake client ignores it).
func TestLiveUnschedulableScaleUp(t *testing.T) {
	b, admin := liveBackend(t, Options{UnschedulableWait: time.Second, StartTimeout: 3 * time.Second})
	spec := liveSpec(t, "print(1)")
	spec.CPUs = 64
	id, err := b.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(context.Background(), id)
	pod, err := admin.CoreV1().Pods(sandboxNamespace).Get(t.Context(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: id + ".", Namespace: sandboxNamespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: sandboxNamespace, Name: id, UID: pod.UID, APIVersion: "v1"},
		Reason:         eventScaleUp, Message: "pod triggered scale-up: [{test-group 1->2 (max: 3)}]", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "cluster-autoscaler"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if ev, err = admin.CoreV1().Events(sandboxNamespace).Create(t.Context(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer admin.CoreV1().Events(sandboxNamespace).Delete(context.Background(), ev.Name, metav1.DeleteOptions{})
	t0 := time.Now()
	_, err = b.Start(t.Context(), id, &launchertest.Buffer{}, &launchertest.Buffer{})
	d := time.Since(t0)
	if err == nil || !strings.Contains(err.Error(), "not running after 3s (unschedulable: ") ||
		!strings.Contains(err.Error(), "a node autoscaler is adding a node for it: TriggeredScaleUp: pod triggered scale-up") || d < 2500*time.Millisecond {
		t.Fatalf("Start after %v: got %v, want the start timeout (3 s) naming the scale-up", d.Round(time.Millisecond), err)
	}
}

// TestLiveUnreachable: an API server that does not answer is ErrEngineUnavailable, naming it.
func TestLiveUnreachable(t *testing.T) {
	cfg := adminConfig(t)
	cfg.Host = "https://127.0.0.1:1"
	b, err := New(cfg, Options{Namespace: sandboxNamespace}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"Ping":   func() error { return b.Ping(t.Context()) },
		"Create": func() error { _, err := b.Create(t.Context(), liveSpec(t, "")); return err },
		"List":   func() error { _, err := b.List(t.Context(), "x"); return err },
	} {
		err := f()
		if !errors.Is(err, backend.ErrEngineUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%s: got %v, want ErrEngineUnavailable naming the API server", name, err)
		}
	}
}

// TestLiveCreateNotCancelled: a create whose context ends while the request is in flight still
// returns the pod's name (the request is not cancelled), so the caller can delete it; a
// cancelled create would leave a pod nobody knows. With an ended context the launcher then
// removes it: nothing of the instance is left.
func TestLiveCreateNotCancelled(t *testing.T) {
	b, admin := liveBackend(t, Options{})
	spec := liveSpec(t, "print(1)")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	id, err := b.Create(ctx, spec)
	if err != nil || id == "" {
		t.Fatalf("Create with an ended context: got %q, %v; want the pod's name", id, err)
	}
	if err := b.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	l, err := admin.CoreV1().Pods(sandboxNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: backend.LabelInstance + "=" + spec.Labels[backend.LabelInstance]})
	if err != nil || len(l.Items) != 0 {
		t.Errorf("pods left: %v, %v", l, err)
	}
}

// TestLiveTerminationMessageUnreachable: the kubelet binds the termination-message file
// (0666, on the node's disk) into the container and copies it into the pod's status. At
// /root/termination-log (terminationMessagePath) no program can write it: caller data
// never reaches the node's disk or the API that way (at the default /dev/termination-log
// this program's write went through).
func TestLiveTerminationMessageUnreachable(t *testing.T) {
	b, admin := liveBackend(t, Options{})
	prog := `import os
for p in ("/dev/termination-log", "/root/termination-log"):
    try:
        with open(p, "w") as f:
            f.write("caller data")
        print(p, "written")
    except OSError as e:
        print(p, type(e).__name__)
print("mounts", sorted(l.split()[4] for l in open("/proc/self/mountinfo") if "termination" in l))`
	spec := liveSpec(t, prog)
	id, stdout, stderr := runPod(t, b, spec, "")
	want := "/dev/termination-log PermissionError\n/root/termination-log PermissionError\nmounts ['/root/termination-log']\n"
	if stdout != want {
		t.Errorf("stdout: got %q, want %q (stderr %q)", stdout, want, stderr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pod, err := admin.CoreV1().Pods(sandboxNamespace).Get(t.Context(), id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cs := pod.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
			if m := cs[0].State.Terminated.Message; m != "" {
				t.Errorf("the pod's status holds the termination message %q, want none", m)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod did not end in 30 s: %+v", pod.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
