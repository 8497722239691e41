package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// The start's waits against a fake core/v1 client: the pod's status is what a test
// writes. The scheduler's real verdict on the test cluster is TestLiveUnschedulable.

// unschedulableMsg is the scheduler's message on the test cluster for a session pod
// beside a full warm pool (kubectl get pod -o jsonpath='{.status.conditions}').
const unschedulableMsg = "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."

// startWaitBackend is a Backend on a fake client holding one pod, "p", made from
// testSpec (cpu 500m, memory 256Mi) and shaped by status.
func startWaitBackend(t *testing.T, opts Options, status func(*corev1.Pod)) (*Backend, func(func(*corev1.Pod))) {
	t.Helper()
	b, update, _ := startWaitBackendEvents(t, opts, status)
	return b, update
}

// startWaitBackendEvents is startWaitBackend, with the fake client's events in "ns".
func startWaitBackendEvents(t *testing.T, opts Options, status func(*corev1.Pod)) (*Backend, func(func(*corev1.Pod)), corev1client.EventInterface) {
	t.Helper()
	cs := newFakeCore()
	opts.Namespace = "ns"
	pod := PodSpec(testSpec(), opts)
	pod.Name = "p"
	status(pod)
	if _, err := cs.CoreV1().Pods("ns").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	update := func(f func(*corev1.Pod)) {
		p, err := cs.CoreV1().Pods("ns").Get(t.Context(), "p", metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		f(p)
		if _, err := cs.CoreV1().Pods("ns").Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}
	return &Backend{cfg: &rest.Config{Host: "https://fake"}, core: cs.CoreV1(), opts: opts.withDefaults(), log: zerolog.Nop()}, update, cs.CoreV1().Events("ns")
}

func pending(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }

func unschedulableNow(p *corev1.Pod) {
	pending(p)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: unschedulableMsg}}
}

func scheduled(p *corev1.Pod) {
	pending(p)
	p.Spec.NodeName = "n1"
	p.Status.NominatedNodeName = ""
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
}

func running(p *corev1.Pod) {
	scheduled(p)
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
}

// testVars spells a setting's variable as the command does (MCP_EXEC_ and the flag).
func testVars(s backend.Setting) string {
	return "MCP_EXEC_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

// TestWaitRunningUnschedulable: a pod the scheduler finds no node for, listed so or
// becoming so while watched, ends the start after UnschedulableWait, long before
// StartTimeout, with the scheduler's reason, the pod's requests and the settings that
// size it and its neighbours, spelled with their variables.
func TestWaitRunningUnschedulable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status func(*corev1.Pod)
		later  func(*corev1.Pod) // applied 100 ms into the wait, if set
	}{
		{"unschedulable when listed", unschedulableNow, nil},
		{"unschedulable while watched", pending, unschedulableNow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, update := startWaitBackend(t, Options{StartTimeout: 20 * time.Second, UnschedulableWait: 300 * time.Millisecond}, tc.status)
			if tc.later != nil {
				time.AfterFunc(100*time.Millisecond, func() { update(tc.later) })
			}
			t0 := time.Now()
			err := b.waitRunning(t.Context(), "p")
			d := time.Since(t0)
			if err == nil {
				t.Fatal("waitRunning: got nil, want an error")
			}
			if d < 300*time.Millisecond || d > 5*time.Second {
				t.Errorf("waitRunning returned after %v, want after UnschedulableWait (300ms) and long before StartTimeout (20s)", d)
			}
			msg := backend.Spell(err, testVars)
			for _, want := range []string{
				"starting pod p: no node can take it",
				`the scheduler says "` + unschedulableMsg + `" (for 300ms, --kube-unschedulable-wait-s, MCP_EXEC_KUBE_UNSCHEDULABLE_WAIT_S; no node autoscaler said it is adding one)`,
				"It requests cpu 500m and memory 256Mi",
				"--cpus, MCP_EXEC_CPUS", "--memory, MCP_EXEC_MEMORY", "--session-memory, MCP_EXEC_SESSION_MEMORY",
				"--pool-size, MCP_EXEC_POOL_SIZE", "--max-sessions, MCP_EXEC_MAX_SESSIONS",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q: want it to contain %q", msg, want)
				}
			}
		})
	}
}

// TestWaitRunningUnschedulableThenPlaced: a pod that was unschedulable and is then
// placed (a pod was deleted, a node added), or one the scheduler preempts for (a
// nominated node), is waited for past UnschedulableWait until it runs.
func TestWaitRunningUnschedulableThenPlaced(t *testing.T) {
	for _, tc := range []struct {
		name string
		then func(*corev1.Pod)
	}{
		{"placed", scheduled},
		{"preempting", func(p *corev1.Pod) { unschedulableNow(p); p.Status.NominatedNodeName = "n1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, update := startWaitBackend(t, Options{StartTimeout: 20 * time.Second, UnschedulableWait: 300 * time.Millisecond}, unschedulableNow)
			time.AfterFunc(100*time.Millisecond, func() { update(tc.then) })
			time.AfterFunc(700*time.Millisecond, func() { update(running) })
			t0 := time.Now()
			if err := b.waitRunning(t.Context(), "p"); err != nil {
				t.Fatalf("waitRunning: %v, want nil once the pod runs", err)
			}
			if d := time.Since(t0); d < 700*time.Millisecond {
				t.Errorf("waitRunning returned after %v, before the pod ran (700ms)", d)
			}
		})
	}
}

// TestWaitRunningTimeoutSaysWhat: at StartTimeout the error names what the pod was
// waiting for, here its container's creation on its node.
func TestWaitRunningTimeoutSaysWhat(t *testing.T) {
	b, _ := startWaitBackend(t, Options{StartTimeout: 300 * time.Millisecond}, scheduled)
	err := b.waitRunning(t.Context(), "p")
	want := "starting pod p: not running after 300ms (on node n1, its container waiting: ContainerCreating)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("waitRunning: got %v, want an error containing %q", err, want)
	}
}

// Node autoscalers' answers to pod "p", as they write them (kubectl describe pod).
const (
	caScaleUp   = "pod triggered scale-up: [{sandbox-pool 1->2 (max: 5)}]"
	caNoScaleUp = "pod didn't trigger scale-up: 1 max node group size reached"
	karpenter   = "Pod should schedule on: nodeclaim/default-x7k2q"
)

// podEvent is an event about pod name, at second s of some minute.
func podEvent(name, reason, msg string, s int) *corev1.Event {
	at := metav1.NewTime(time.Date(2026, 12, 6, 18, 0, s, 0, time.UTC))
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name + "." + reason, Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name},
		Reason:         reason, Message: msg, FirstTimestamp: at, LastTimestamp: at,
	}
}

// TestWaitRunningScaleUp: a pod still unschedulable after UnschedulableWait whose events
// say that a node autoscaler is adding a node for it (cluster-autoscaler, Karpenter)
// is waited for until it runs; at StartTimeout the error says what it waited for. The
// autoscaler's newest word counts, and only for this pod: a scale-up it then gave up,
// or another pod's, ends the start after UnschedulableWait as without one.
func TestWaitRunningScaleUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []*corev1.Event
		want   string // "" = it runs
	}{
		{"cluster-autoscaler", []*corev1.Event{podEvent("p", eventScaleUp, caScaleUp, 1)}, ""},
		{"karpenter", []*corev1.Event{podEvent("p", eventNominated, karpenter, 1)}, ""},
		{"scale-up, then none", []*corev1.Event{podEvent("p", eventScaleUp, caScaleUp, 1), podEvent("p", eventNoScaleUp, caNoScaleUp, 2)}, "no node can take it"},
		{"none, then a scale-up", []*corev1.Event{podEvent("p", eventNoScaleUp, caNoScaleUp, 1), podEvent("p", eventScaleUp, caScaleUp, 2)}, ""},
		{"another pod's", []*corev1.Event{podEvent("q", eventScaleUp, caScaleUp, 1)}, "no node can take it"},
		{"no events", nil, "no node can take it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, update, events := startWaitBackendEvents(t, Options{StartTimeout: 20 * time.Second, UnschedulableWait: 300 * time.Millisecond}, unschedulableNow)
			for _, e := range tc.events {
				if _, err := events.Create(t.Context(), e, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			time.AfterFunc(900*time.Millisecond, func() { update(running) })
			t0 := time.Now()
			err := b.waitRunning(t.Context(), "p")
			d := time.Since(t0)
			if tc.want == "" {
				if err != nil || d < 900*time.Millisecond {
					t.Fatalf("waitRunning: %v after %v, want nil once the pod runs (900ms), past UnschedulableWait (300ms)", err, d)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || d > 800*time.Millisecond {
				t.Fatalf("waitRunning: %v after %v, want %q after UnschedulableWait (300ms)", err, d, tc.want)
			}
		})
	}
}

// TestWaitRunningScaleUpTimeout: a node being added that does not come in StartTimeout
// fails the start then, saying what the pod waited for.
func TestWaitRunningScaleUpTimeout(t *testing.T) {
	b, _, events := startWaitBackendEvents(t, Options{StartTimeout: 700 * time.Millisecond, UnschedulableWait: 200 * time.Millisecond}, unschedulableNow)
	if _, err := events.Create(t.Context(), podEvent("p", eventScaleUp, caScaleUp, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := b.waitRunning(t.Context(), "p")
	want := "starting pod p: not running after 700ms (unschedulable: " + unschedulableMsg + "; a node autoscaler is adding a node for it: TriggeredScaleUp: " + caScaleUp + ")"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("waitRunning: got %v, want an error containing %q", err, want)
	}
}

// TestWaitRunningUnschedulableUnbounded: a negative UnschedulableWait (the command's
// --kube-unschedulable-wait-s 0) leaves an unschedulable pod to StartTimeout alone.
func TestWaitRunningUnschedulableUnbounded(t *testing.T) {
	b, _ := startWaitBackend(t, Options{StartTimeout: 500 * time.Millisecond, UnschedulableWait: -1}, unschedulableNow)
	err := b.waitRunning(t.Context(), "p")
	want := "starting pod p: not running after 500ms (unschedulable: " + unschedulableMsg + ")"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("waitRunning: got %v, want an error containing %q", err, want)
	}
}
