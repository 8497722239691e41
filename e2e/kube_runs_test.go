package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestKubeRunReplicas: background runs on the Kubernetes backend, served by two
// stateless replicas behind the test load balancer (nginx, round-robin, no affinity),
// each run kept in its pod. A run started on one replica shows its progress on the
// other; the starter is SIGKILLed and a replica started afterwards (nothing in its
// memory) fetches the result and files, as does the survivor; a run started on the
// survivor is cancelled from the new replica; a timeout and an OOM kill come back as
// results; an MCP task (2026-07-28) started on one replica completes through tasks/get
// on another; an unknown run_id is not found. Once their TTL has passed, the sweepers
// remove every run's pod, and the run is no longer served. Neither the pods nor the logs
// hold a handle.
func TestKubeRunReplicas(t *testing.T) {
	kc, rc := e2e.KubeCluster(t)
	nginx := lbFindNginx(t)
	bin := e2e.Build(t)
	token := e2e.Random()
	// A quarter of a CPU per pod: a kept result holds its pod, and the test node has two.
	env := e2e.Env("MCP_EXEC_BACKEND=kubernetes", "MCP_EXEC_KUBECONFIG="+kc,
		"MCP_EXEC_KUBE_NAMESPACE=mcp-exec-sandbox", "MCP_EXEC_KUBE_IMAGE_PULL_POLICY=Never",
		"MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_STATELESS=true", "MCP_EXEC_LOG_FORMAT=json", "MCP_EXEC_LOG_LEVEL=info",
		"MCP_EXEC_CPUS=0.25", "MCP_EXEC_MEMORY=256m", "MCP_EXEC_RUN_TTL_S=20",
		"MCP_EXEC_MAX_BACKGROUND_RUNS=8") // opt-in on Kubernetes
	suffix := strconv.Itoa(os.Getpid())
	var replicas []*e2e.Server
	for i := range 2 {
		replicas = append(replicas, e2e.Serve(t, bin, env, "http", fmt.Sprintf("kube-run-%d-%s", i, suffix), token))
	}
	lb := lbStartNginx(t, nginx, replicas)
	byAddr := map[string]*e2e.Server{}
	for _, s := range replicas {
		byAddr[strings.TrimPrefix(s.Base, "http://")] = s
	}
	connect := func(endpoint string) (*mcp.ClientSession, *upstreamRecorder) {
		rec := &upstreamRecorder{token: token}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "kube-runs-test", Version: "0"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rec}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs, rec
	}
	cs, rec := connect(lb + "/mcp")
	call := kubeToolCaller(t, cs)

	id := bgStart(t, cs, map[string]any{"code": "import sys, time\nprint('first secret line')\nsys.stdout.flush()\ntime.sleep(8)\n" +
		"print('done')\nopen('/tmp/outputs/r.txt', 'w').write('file data')", "timeout_s": 60})
	starter := byAddr[rec.last()]
	if starter == nil {
		t.Fatalf("exec answered by %q, not a replica", rec.last())
	}
	var other *e2e.Server
	for _, s := range replicas {
		if s != starter {
			other = s
		}
	}
	// Progress on the other replica (round-robin: every second call is the other's).
	seen := false
	for end := time.Now().Add(30 * time.Second); !seen && time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		out, text, isErr := call("run_wait", map[string]any{"run_id": id, "timeout_s": 0})
		if isErr || out["status"] != "running" {
			t.Fatalf("run_wait while it runs, on %s: %s", rec.last(), text)
		}
		tail, _ := out["stdout_tail"].(string)
		seen = byAddr[rec.last()] == other && strings.Contains(tail, "first secret line")
	}
	if !seen {
		t.Fatalf("the other replica never showed the run's first line in its stdout_tail")
	}

	// The starter dies; a replica started afterwards, and the survivor, have the result.
	if err := starter.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-starter.Done()
	fresh := e2e.Serve(t, bin, env, "http", "kube-run-2-"+suffix, token)
	fcs, _ := connect(fresh.Endpoint)
	fcall := kubeToolCaller(t, fcs)
	for name, c := range map[string]*mcp.ClientSession{"the new replica": fcs, "the survivor": cs} {
		r, res := bgWait(t, c, id, 2*time.Minute)
		if res.IsError || r.Status != "completed" || r.Stdout != "first secret line\ndone\n" || r.ExitCode != 0 || len(r.Files) != 1 || r.Files[0].Name != "r.txt" {
			t.Errorf("result on %s: %+v %v", name, r, res.Content)
		}
	}

	// Cancel from the new replica a run the survivor started.
	id2 := bgStart(t, cs, map[string]any{"code": "import time\nprint('before', flush=True)\ntime.sleep(600)", "timeout_s": 300})
	time.Sleep(2 * time.Second)
	if out, text, isErr := fcall("run_cancel", map[string]any{"run_id": id2}); isErr || out["canceled"] != true {
		t.Fatalf("run_cancel on the new replica: %s", text)
	}
	if _, text, isErr := call("run_wait", map[string]any{"run_id": id2, "timeout_s": 0}); !isErr || !strings.Contains(text, "cancelled") {
		t.Errorf("run_wait after the cancel: %q (error %v), want it to say cancelled", text, isErr)
	}
	if out, text, isErr := call("run_cancel", map[string]any{"run_id": id2}); isErr || out["canceled"] != false {
		t.Errorf("cancelling again: %s, want canceled false", text)
	}

	// A timeout and an OOM kill are results.
	id3 := bgStart(t, cs, map[string]any{"code": "while True: pass", "timeout_s": 2})
	if r, res := bgWait(t, fcs, id3, 2*time.Minute); res.IsError || !r.TimedOut || r.ExitCode != 137 {
		t.Errorf("a run past its timeout: %+v %v", r, res.Content)
	}
	id4 := bgStart(t, cs, map[string]any{"code": "c = []\nwhile True: c.append(b'\\1' * (8 << 20))", "timeout_s": 60})
	if r, res := bgWait(t, fcs, id4, 2*time.Minute); res.IsError || !r.OOMKilled || r.TimedOut {
		t.Errorf("a run past its memory: %+v %v", r, res.Content)
	}
	if _, text, isErr := fcall("run_wait", map[string]any{"run_id": "run_" + strings.Repeat("A", 32), "timeout_s": 0}); !isErr || !strings.Contains(text, "not found") {
		t.Errorf("an unknown run_id: %q, want not found", text)
	}

	// An MCP task started through the balancer (the survivor) completes on the new replica.
	tk := tasksPost(t, lb+"/mcp", token, "tools/call", "exec", map[string]any{"name": "exec", "arguments": map[string]any{"code": "import time\ntime.sleep(4)\nprint('slept')"}})
	tid, _ := tk["taskId"].(string)
	if tk["resultType"] != "task" || !strings.HasPrefix(tid, "run_") {
		t.Fatalf("tools/call as a task: %v", tk)
	}
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		g := tasksPost(t, fresh.Endpoint, token, "tasks/get", tid, map[string]any{"taskId": tid})
		if g["status"] == "working" && time.Now().Before(end) {
			continue
		}
		res, _ := g["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		if g["status"] != "completed" || sc["stdout"] != "slept\n" {
			t.Fatalf("tasks/get on the new replica: %v", g)
		}
		break
	}

	// TTL (20 s after each end): the sweepers remove every run's pod.
	ids := []string{id, id2, id3, id4, tid}
	pods := func() (n int) {
		for _, s := range append(replicas, fresh) {
			n += len(kubeInstancePods(t, rc, s.Instance)())
		}
		return n
	}
	for end := time.Now().Add(2 * time.Minute); pods() != 0; time.Sleep(time.Second) {
		if time.Now().After(end) {
			t.Fatalf("%d run pods left 2 min after the runs ended (TTL 20 s)", pods())
		}
	}
	if _, text, isErr := fcall("run_wait", map[string]any{"run_id": id, "timeout_s": 0}); !isErr || !(strings.Contains(text, "expired") || strings.Contains(text, "not found")) {
		t.Errorf("run_wait after the TTL: %q, want expired (or not found, on a replica that did not sweep it)", text)
	}
	for _, s := range append(replicas, fresh) {
		for _, h := range ids {
			if strings.Contains(s.Logs.String(), h) || strings.Contains(s.Logs.String(), "secret line") {
				t.Errorf("replica %s logged a run handle or output", s.Instance)
			}
		}
	}
}
