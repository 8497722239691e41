package kube

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// The store of shared sessions (shared.go) against an API whose updates and deletes honour
// resourceVersion as the API server's do: client-go's fake object tracker does not, so a
// reactor adds it. The whole path, with pods, is TestLiveSharedSession on the test cluster.

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// casClient is a fake core/v1 client whose pod updates are compare-and-swap on the
// resourceVersion (a mismatch is a Conflict; each update moves it), as are deletes with a
// resourceVersion precondition. bump, when set, is called before each update is decided.
func casClient(t *testing.T, bump func(tr k8stesting.ObjectTracker)) *fakeCore {
	cs := newFakeCore()
	tr := cs.Tracker()
	var rv atomic.Int64
	rv.Store(100)
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		p.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		return true, p, tr.Create(podsGVR, p, p.Namespace)
	})
	cs.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if bump != nil {
			bump(tr)
		}
		p := a.(k8stesting.UpdateAction).GetObject().(*corev1.Pod).DeepCopy()
		cur, err := tr.Get(podsGVR, p.Namespace, p.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*corev1.Pod).ResourceVersion != p.ResourceVersion {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), p.Name, errors.New("the object has been modified"))
		}
		p.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		return true, p, tr.Update(podsGVR, p, p.Namespace)
	})
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteActionImpl)
		cur, err := tr.Get(podsGVR, d.Namespace, d.Name)
		if err != nil {
			return true, nil, err
		}
		if pre := d.DeleteOptions.Preconditions; pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != cur.(*corev1.Pod).ResourceVersion {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), d.Name, errors.New("precondition failed"))
		}
		return true, nil, tr.Delete(podsGVR, d.Namespace, d.Name)
	})
	return cs
}

type fakeReplicas struct {
	t   *testing.T
	cs  *fakeCore
	now time.Time
}

func (f *fakeReplicas) replica() *SessionStore {
	b := &Backend{cfg: &rest.Config{Host: "https://fake"}, core: f.cs.CoreV1(), opts: Options{Namespace: "ns"}.withDefaults(), log: zerolog.Nop()}
	return &SessionStore{b: b, log: zerolog.Nop(), now: func() time.Time { return f.now }}
}

// add makes handle's pod as Create would, idle for idle, and returns its name.
func (f *fakeReplicas) add(name, handle, owner string, idle, life time.Duration) {
	f.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		Labels:      map[string]string{backend.LabelSessionKey: SessionKey(handle)},
		Annotations: sessionAnnotations(handle, owner, idle, f.now.Add(idle), f.now.Add(life))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := f.cs.CoreV1().Pods("ns").Create(f.t.Context(), p, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeReplicas) pods() map[string]bool {
	list, err := f.cs.CoreV1().Pods("ns").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range list.Items {
		out[p.Name] = true
	}
	return out
}

func TestSharedClaimSerializes(t *testing.T) {
	f := &fakeReplicas{t: t, cs: casClient(t, nil), now: time.Unix(1_800_000_000, 0)}
	a, b := f.replica(), f.replica()
	h, owner := testHandle(), "oauth alice"
	f.add("p1", h, owner, time.Minute, time.Hour)

	name, tok, info, err := a.claim(t.Context(), h, owner, 10*time.Second)
	if err != nil || name != "p1" || info.Count != 1 {
		t.Fatalf("claim on A: %q, %+v, %v", name, info, err)
	}
	if _, _, _, err := b.claim(t.Context(), h, owner, 10*time.Second); !errors.Is(err, launcher.ErrSessionBusy) {
		t.Fatalf("claim on B during A's call: %v, want busy", err)
	}
	f.now = f.now.Add(5 * time.Second)
	exp, err := a.release(t.Context(), name, tok)
	if err != nil || !exp.Equal(f.now.Add(time.Minute)) {
		t.Fatalf("release: %s, %v; want the idle deadline a minute on", exp, err)
	}
	// A release with another claim's token changes nothing.
	if _, err := b.release(t.Context(), name, "not-the-token"); err != nil {
		t.Fatal(err)
	}
	if _, _, info, err := b.claim(t.Context(), h, owner, 10*time.Second); err != nil || info.Count != 2 {
		t.Fatalf("claim on B after A's call: %+v, %v", info, err)
	}
}

// A conflict that is not another claim (the kubelet's status updates move the
// resourceVersion too) is read again: the call is not refused as busy.
func TestSharedClaimRetriesConflicts(t *testing.T) {
	var n atomic.Int32
	cs := casClient(t, func(tr k8stesting.ObjectTracker) {
		if n.Add(1) > 2 {
			return
		}
		cur, _ := tr.Get(podsGVR, "ns", "p1")
		p := cur.(*corev1.Pod).DeepCopy()
		p.ResourceVersion += "0" // a status update in between
		_ = tr.Update(podsGVR, p, "ns")
	})
	f := &fakeReplicas{t: t, cs: cs, now: time.Unix(1_800_000_000, 0)}
	h := testHandle()
	f.add("p1", h, "", time.Minute, time.Hour)
	if _, _, info, err := f.replica().claim(t.Context(), h, "", time.Second); err != nil || info.Count != 1 {
		t.Fatalf("claim across two unrelated updates: %+v, %v", info, err)
	}
	if n.Load() != 3 {
		t.Errorf("updates tried: %d, want 3", n.Load())
	}
}

// Another identity's handle, a wrong handle with the same label, and no session at all
// give the same answer.
func TestSharedFindVerifies(t *testing.T) {
	f := &fakeReplicas{t: t, cs: casClient(t, nil), now: time.Unix(1_800_000_000, 0)}
	s := f.replica()
	h := testHandle()
	f.add("p1", h, "oauth alice", time.Minute, time.Hour)
	// A pod that carries h's label but another handle's hash (forged label) is not h's.
	other := testHandle()
	f.add("p2", other, "oauth alice", time.Minute, time.Hour)
	p2, _ := f.cs.CoreV1().Pods("ns").Get(t.Context(), "p2", metav1.GetOptions{})
	p2.Labels[backend.LabelSessionKey] = SessionKey(h)
	if _, err := f.cs.CoreV1().Pods("ns").Update(t.Context(), p2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ handle, owner string }{{h, "oauth mallory"}, {h, ""}, {testHandle(), "oauth alice"}} {
		if _, _, _, err := s.claim(t.Context(), c.handle, c.owner, time.Second); !errors.Is(err, ErrSessionGone) {
			t.Errorf("claim %+v: %v, want ErrSessionGone", c, err)
		}
		if closed, err := s.Close(t.Context(), c.handle, c.owner); closed || err != nil {
			t.Errorf("close %+v: %v, %v", c, closed, err)
		}
	}
	if p, err := s.find(t.Context(), h, "oauth alice"); err != nil || p.Name != "p1" {
		t.Fatalf("find: %v, %v", p, err)
	}
	if closed, err := s.Close(t.Context(), h, "oauth alice"); !closed || err != nil {
		t.Fatalf("close: %v, %v", closed, err)
	}
	if got := f.pods(); got["p1"] || !got["p2"] {
		t.Fatalf("pods after close: %v", got)
	}
}

// A claim of a session past its deadline, or one whose last call's replica went away,
// deletes its pod and finds no session.
func TestSharedClaimEndsDueSessions(t *testing.T) {
	f := &fakeReplicas{t: t, cs: casClient(t, nil), now: time.Unix(1_800_000_000, 0)}
	a, b := f.replica(), f.replica()
	idle, stale := testHandle(), testHandle()
	f.add("p1", idle, "", time.Second, time.Hour)
	f.add("p2", stale, "", time.Minute, time.Hour)
	if _, _, _, err := a.claim(t.Context(), stale, "", time.Second); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(claimMargin + 2*time.Second) // A never released: gone mid-call
	for _, h := range []string{idle, stale} {
		if _, _, _, err := b.claim(t.Context(), h, "", time.Second); !errors.Is(err, ErrSessionGone) {
			t.Errorf("claim: %v, want ErrSessionGone", err)
		}
	}
	if got := f.pods(); len(got) != 0 {
		t.Fatalf("pods left: %v", got)
	}
}

// Every replica's sweeper deletes the due sessions, whoever made them, and only those.
func TestSharedSweep(t *testing.T) {
	f := &fakeReplicas{t: t, cs: casClient(t, nil), now: time.Unix(1_800_000_000, 0)}
	a, b := f.replica(), f.replica()
	hs := map[string]string{}
	for _, n := range []string{"fresh1", "idle2", "busy3", "stale4", "life5", "bad6"} {
		hs[n] = testHandle()
	}
	f.add("fresh1", hs["fresh1"], "", time.Hour, 2*time.Hour)
	f.add("idle2", hs["idle2"], "", time.Second, time.Hour)
	f.add("busy3", hs["busy3"], "", time.Second, time.Hour)
	f.add("stale4", hs["stale4"], "", time.Hour, 2*time.Hour)
	f.add("life5", hs["life5"], "", time.Hour, 10*time.Second)
	f.add("bad6", hs["bad6"], "", time.Hour, 2*time.Hour)
	bad, _ := f.cs.CoreV1().Pods("ns").Get(t.Context(), "bad6", metav1.GetOptions{})
	bad.Annotations[annIdleUntil] = "soon"
	if _, err := f.cs.CoreV1().Pods("ns").Update(t.Context(), bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.claim(t.Context(), hs["stale4"], "", time.Second); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(20 * time.Second)
	if _, _, _, err := a.claim(t.Context(), hs["busy3"], "", time.Minute); err == nil {
		t.Fatal("claim of an idle-expired session succeeded")
	}
	// busy3 was deleted by that claim; make a new one, claimed for a long call.
	f.add("busy3", hs["busy3"], "", time.Second, time.Hour)
	if _, _, _, err := a.claim(t.Context(), hs["busy3"], "", time.Hour); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(20 * time.Second) // stale4's claim (1 s + margin) has run out; life5 is past its lifetime
	n, err := b.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := f.pods()
	if n != 4 || !got["fresh1"] || !got["busy3"] || len(got) != 2 {
		t.Fatalf("swept %d, left %v; want 4 swept, fresh1 and busy3 left", n, got)
	}
}

// TestListLeavesOutSharedSessions: an instance's List (its reaper's, its shutdown's)
// names its own pods, never a shared session's, which every replica serves.
func TestListLeavesOutSharedSessions(t *testing.T) {
	cs := newFakeCore()
	mk := func(name string, extra map[string]string) {
		l := map[string]string{backend.LabelRole: backend.RoleSandbox, backend.LabelInstance: "a"}
		maps.Copy(l, extra)
		if _, err := cs.CoreV1().Pods("ns").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("one-shot", nil)
	mk("shared", map[string]string{backend.LabelSessionKey: SessionKey(testHandle())})
	mk("other", map[string]string{backend.LabelInstance: "b"})
	b := &Backend{cfg: &rest.Config{Host: "https://fake"}, core: cs.CoreV1(), opts: Options{Namespace: "ns"}.withDefaults(), log: zerolog.Nop()}
	got, err := b.List(t.Context(), "a")
	if err != nil || !slices.Equal(got, []string{"one-shot"}) {
		t.Fatalf("List(a): %v, %v; want [one-shot]", got, err)
	}
}
