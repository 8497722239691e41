package kube

import (
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// TestRunFindVerifies: a run is found for its owner only (another identity's handle, a
// handle that never was and a pod with the run's label but another handle's hash all
// answer not found), is counted for its owner, and once this replica has removed it at
// its TTL it is expired for its owner and still not found for anyone else. The whole
// path, with pods, is TestLiveRunAcrossReplicas on the test cluster.
func TestRunFindVerifies(t *testing.T) {
	cs := casClient(t, nil)
	now := time.Unix(1_800_000_000, 0)
	b := &Backend{cfg: &rest.Config{Host: "https://fake"}, core: cs.CoreV1(), opts: Options{Namespace: "ns"}.withDefaults(), log: zerolog.Nop()}
	s := NewRunStore(b, zerolog.Nop(), time.Minute)
	s.now = func() time.Time { return now }
	add := func(name, handle, owner string) {
		t.Helper()
		labels, ann := s.Create(handle, owner, 10*time.Second)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, Annotations: ann},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if _, err := cs.CoreV1().Pods("ns").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h, other := testHandle(), testHandle()
	add("r1", h, "oauth alice")
	add("r2", other, "oauth alice")
	forged, _ := cs.CoreV1().Pods("ns").Get(t.Context(), "r2", metav1.GetOptions{})
	forged.Labels[backend.LabelSessionKey] = RunKey(h)
	if _, err := cs.CoreV1().Pods("ns").Update(t.Context(), forged, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ handle, owner string }{{h, "oauth mallory"}, {h, ""}, {testHandle(), "oauth alice"}} {
		if _, err := s.Get(t.Context(), c.handle, c.owner); !errors.Is(err, ErrRunNotFound) {
			t.Errorf("get %+v: %v, want ErrRunNotFound", c, err)
		}
	}
	if r, err := s.Get(t.Context(), h, "oauth alice"); err != nil || r.Sandbox != "r1" {
		t.Fatalf("get: %+v, %v; want r1", r, err)
	}
	if all, owned, err := s.Count(t.Context(), "oauth alice"); all != 2 || owned != 2 || err != nil {
		t.Fatalf("count: %d, %d, %v; want 2, 2", all, owned, err)
	}
	if all, owned, err := s.Count(t.Context(), "oauth mallory"); all != 2 || owned != 0 || err != nil {
		t.Fatalf("count for another identity: %d, %d, %v; want 2, 0", all, owned, err)
	}
	now = now.Add(10*time.Second + runEndMargin + time.Minute) // past its TTL, its end never seen
	if _, err := s.Get(t.Context(), h, "oauth alice"); !errors.Is(err, ErrRunExpired) {
		t.Fatalf("get past the TTL: %v, want ErrRunExpired", err)
	}
	if _, err := s.Get(t.Context(), h, "oauth alice"); !errors.Is(err, ErrRunExpired) {
		t.Fatalf("get after its removal: %v, want ErrRunExpired", err)
	}
	if _, err := s.Get(t.Context(), h, "oauth mallory"); !errors.Is(err, ErrRunNotFound) {
		t.Fatalf("get by another identity after its removal: %v, want ErrRunNotFound", err)
	}
}
