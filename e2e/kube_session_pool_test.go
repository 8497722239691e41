package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
)

// TestKubeSessionsBesidePool: two sessions open at once beside a full warm pool, on
// pods sized so that all four fit the test cluster's node (2 CPUs allocatable: the pool
// 2 x 0.5 CPU, the sessions 2 x 0.5). With the defaults (--cpus 1) the pool alone
// takes both CPUs and no session pod fits: session_create then fails after
// UnschedulableWait (30 s) naming "Insufficient cpu" and the settings (docs/kubernetes.md,
// "Sizing the cluster"). Each session keeps its own state across a one-shot exec, whose
// pod the pool replaces.
func TestKubeSessionsBesidePool(t *testing.T) {
	kc, rc := e2e.KubeCluster(t)
	bin := e2e.Build(t)
	instance := "test-kube-sessions-pool"
	list := kubeInstancePods(t, rc, instance)
	s := e2e.Serve(t, bin, e2e.Env("MCP_EXEC_BACKEND=kubernetes", "MCP_EXEC_KUBECONFIG="+kc,
		"MCP_EXEC_KUBE_NAMESPACE="+kube.DefaultNamespace, "MCP_EXEC_KUBE_IMAGE_PULL_POLICY=Never",
		"MCP_EXEC_POOL_SIZE=2", "MCP_EXEC_CPUS=0.5"),
		"http", instance, e2e.Random())
	cs := s.Connect(t, nil, nil)
	call := kubeToolCaller(t, cs)
	for deadline := time.Now().Add(30 * time.Second); len(list()) < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool: pods %v, want 2", list())
		}
	}

	var ids []string
	for i := range 2 {
		t0 := time.Now()
		out, text, isErr := call("session_create", map[string]any{})
		id, _ := out["session_id"].(string)
		if isErr || id == "" {
			t.Fatalf("session_create %d beside the pool, after %v: %s", i+1, time.Since(t0).Round(time.Millisecond), text)
		}
		t.Logf("session_create %d: %v", i+1, time.Since(t0).Round(time.Millisecond))
		ids = append(ids, id)
	}
	exec := func(args map[string]any) string {
		t.Helper()
		out, text, isErr := call("exec", args)
		if isErr {
			t.Fatalf("exec %v: %s", args, text)
		}
		stdout, _ := out["stdout"].(string)
		return stdout
	}
	for i, id := range ids {
		exec(map[string]any{"code": "x = " + strings.Repeat("7", i+1), "session_id": id})
	}
	if got := exec(map[string]any{"code": "print('one-shot')"}); got != "one-shot\n" {
		t.Fatalf("one-shot exec: got %q", got)
	}
	for i, id := range ids {
		if got, want := exec(map[string]any{"code": "print(x)", "session_id": id}), strings.Repeat("7", i+1)+"\n"; got != want {
			t.Errorf("session %d: print(x) got %q, want %q", i+1, got, want)
		}
		if _, text, _ := call("session_close", map[string]any{"session_id": id}); !strings.Contains(text, "closed: true") {
			t.Fatalf("session_close: %s", text)
		}
	}
}
