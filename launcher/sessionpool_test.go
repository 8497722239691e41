package launcher_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// TestSessionPool, against the engine: OpenSession takes the sandbox that waits in the
// session pool (the counter says so) and the pool refills with another one; the
// session ends at the pooled sandbox's expiry label, never later than asked; a closed
// session's sandbox is removed, never served again: the next session gets the refilled
// one, with an empty interpreter; a session that asks for another memory limit starts
// cold beside the pool. With one execution slot and no queue, a one-shot run beside
// the waiting sandbox and an idle session gets it.
func TestSessionPool(t *testing.T) {
	const mem = 300 * launcher.MiB
	l := launchertest.New(t, launcher.Options{PoolSize: -1, MaxConcurrent: 1,
		SessionPool: launcher.SessionPoolOptions{Size: 1, Memory: mem, Lifetime: time.Hour}})
	cli := launchertest.Client(t)
	sandboxes := func() []string {
		t.Helper()
		ids, err := l.Sandboxes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	label := func(id string) int64 {
		t.Helper()
		ins, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(ins.Container.Config.Labels[launcher.LabelSessionExpires], 10, 64)
		if err != nil {
			t.Fatalf("sandbox %.12s: expiry label: %v", id, err)
		}
		return v
	}
	waitIdle := func(what string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for l.SessionPoolStats().Idle < 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the session pool did not fill in 90 s (%+v)", what, l.SessionPoolStats())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	waitIdle("at start")
	ids := sandboxes()
	if len(ids) != 1 {
		t.Fatalf("sandboxes with an idle session pool of 1: %d, want 1", len(ids))
	}
	pooled := ids[0]
	if exp := label(pooled); exp > time.Now().Add(time.Hour).Unix() || exp < time.Now().Add(time.Hour-90*time.Second).Unix() {
		t.Errorf("pooled sandbox's expiry label %d: want its creation plus the lifetime (about now + 1 h)", exp)
	}

	asked := time.Now().Add(time.Hour)
	s1 := openSession(t, l, launcher.SessionOptions{Expires: asked, Memory: mem})
	if st := l.SessionPoolStats(); st.FromPool != 1 || st.Cold != 0 {
		t.Fatalf("after one session_create: from pool %d, cold %d; want 1, 0", st.FromPool, st.Cold)
	}
	if got := s1.Expires(); got.After(asked) || got.Unix() != label(pooled) {
		t.Errorf("session from the pool expires %v; want its sandbox's label %d, not after %v", got, label(pooled), asked)
	}
	sessionExec(t, s1, launcher.Job{Code: "x = 41"})
	wantState(t, sessionExec(t, s1, launcher.Job{Code: "print(x + 1)"}), launcher.SessionKept, "42\n")

	waitIdle("after the take")
	ids = sandboxes()
	if len(ids) != 2 || !slices.Contains(ids, pooled) {
		t.Fatalf("sandboxes after the refill: %d (taken one there: %v), want the taken one and a new one", len(ids), slices.Contains(ids, pooled))
	}
	refilled := ids[0]
	if refilled == pooled {
		refilled = ids[1]
	}

	s1.Close()
	deadline := time.Now().Add(30 * time.Second)
	for slices.Contains(sandboxes(), pooled) {
		if time.Now().After(deadline) {
			t.Fatalf("the closed session's sandbox %.12s is still there after 30 s", pooled)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s2 := openSession(t, l, launcher.SessionOptions{Expires: time.Now().Add(time.Hour), Memory: mem})
	if st := l.SessionPoolStats(); st.FromPool != 2 {
		t.Fatalf("second session: from pool %d, want 2", st.FromPool)
	}
	wantState(t, sessionExec(t, s2, launcher.Job{Code: "print('x' in globals())"}), launcher.SessionKept, "False\n")
	if ids := sandboxes(); !slices.Contains(ids, refilled) || slices.Contains(ids, pooled) {
		t.Fatalf("second session: sandboxes hold the refilled one %v, the first session's %v; want true, false", slices.Contains(ids, refilled), slices.Contains(ids, pooled))
	}

	// Another memory limit: cold, and none of the pool's. Its expiry is ten minutes
	// short of a pooled sandbox's label (creation plus the hour), so that the two can be
	// told apart: a refill started within the second of asked had asked's label.
	before := sandboxes()
	asked = time.Now().Add(time.Hour - 10*time.Minute)
	s3 := openSession(t, l, launcher.SessionOptions{Expires: asked})
	if st := l.SessionPoolStats(); st.FromPool != 2 || st.Cold != 1 {
		t.Fatalf("session with another memory limit: from pool %d, cold %d; want 2, 1", st.FromPool, st.Cold)
	}
	if got := s3.Expires(); got.Unix() != asked.Unix() {
		t.Errorf("cold session expires %v, want %v", got, asked)
	}
	// The new sandboxes: the cold session's, labelled with the expiry asked for, and
	// maybe the pool's refill (labelled with its own creation plus the lifetime).
	var labels []int64
	cold := 0
	for _, id := range sandboxes() {
		if !slices.Contains(before, id) {
			labels = append(labels, label(id))
			if label(id) == asked.Unix() {
				cold++
			}
		}
	}
	if cold != 1 {
		t.Errorf("new sandboxes' expiry labels %v: want exactly one %d (the cold session's)", labels, asked.Unix())
	}
	// Neither the waiting sandbox nor the idle sessions hold the one execution slot.
	waitIdle("at the end")
	if res, err := l.Run(t.Context(), launcher.Job{Code: "print('one-shot')", Timeout: 20 * time.Second}); err != nil || res.Stdout != "one-shot\n" {
		t.Fatalf("one-shot run beside the session pool and idle sessions, one slot: %q, %v", res.Stdout, err)
	}
}
