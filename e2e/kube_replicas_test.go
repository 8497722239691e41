package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// upstreamRecorder is a client transport that sends the token and records, for each
// tools/call, which replica answered (nginx's X-Upstream header).
type upstreamRecorder struct {
	token string
	mu    sync.Mutex
	calls []string // X-Upstream of each tools/call response, in order
}

func (u *upstreamRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-MCP-AUTH", u.token)
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && bytes.Contains(body, []byte(`"tools/call"`)) {
		u.mu.Lock()
		u.calls = append(u.calls, resp.Header.Get("X-Upstream"))
		u.mu.Unlock()
	}
	return resp, err
}

func (u *upstreamRecorder) last() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.calls) == 0 {
		return ""
	}
	return u.calls[len(u.calls)-1]
}

// TestKubeSessionReplicas: two replicas of the binary on the Kubernetes backend of the
// test cluster, stateless (no MCP session: a 2026-07-28 client), behind the test load
// balancer (nginx, round-robin, no affinity), serve one session alternately: its state
// carries from one replica to the other call after call; a call while another runs on
// the other replica is busy; the replica that created it is SIGKILLed and the other goes
// on serving it (nothing of the session was in the dead replica); session_close through
// the balancer ends it for both; no pod is left. The pods hold nothing of the handle.
func TestKubeSessionReplicas(t *testing.T) {
	kc, rc := e2e.KubeCluster(t)
	nginx := lbFindNginx(t)
	bin := e2e.Build(t)
	token := e2e.Random()
	env := e2e.Env("MCP_EXEC_BACKEND=kubernetes", "MCP_EXEC_KUBECONFIG="+kc,
		"MCP_EXEC_KUBE_NAMESPACE=mcp-exec-sandbox", "MCP_EXEC_KUBE_IMAGE_PULL_POLICY=Never",
		"MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_STATELESS=true", "MCP_EXEC_LOG_FORMAT=json", "MCP_EXEC_LOG_LEVEL=info",
		"MCP_EXEC_SESSION_IDLE_TIMEOUT_S=60", "MCP_EXEC_SESSION_MAX_LIFETIME_S=300")
	suffix := strconv.Itoa(os.Getpid())
	var replicas []*e2e.Server
	for i := range 2 {
		replicas = append(replicas, e2e.Serve(t, bin, env, "http", fmt.Sprintf("kube-rep-%d-%s", i, suffix), token))
	}
	lb := lbStartNginx(t, nginx, replicas)
	byAddr := map[string]*e2e.Server{}
	for _, s := range replicas {
		byAddr[strings.TrimPrefix(s.Base, "http://")] = s
	}
	pods := func() []string {
		return append(kubeInstancePods(t, rc, replicas[0].Instance)(), kubeInstancePods(t, rc, replicas[1].Instance)()...)
	}

	rec := &upstreamRecorder{token: token}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "kube-replicas-test", Version: "0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: lb + "/mcp", HTTPClient: &http.Client{Transport: rec}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if id := cs.ID(); id != "" {
		t.Fatalf("the client got MCP session %q from stateless replicas, want none", id)
	}
	call := kubeToolCaller(t, cs)

	out, text, isErr := call("session_create", map[string]any{})
	id, _ := out["session_id"].(string)
	if isErr || id == "" {
		t.Fatalf("session_create: %s", text)
	}
	creator := byAddr[rec.last()]
	if creator == nil {
		t.Fatalf("session_create answered by %q, not a replica", rec.last())
	}
	kubeNoHandleOnPods(t, rc, creator.Instance, id)

	// x grows by one per call, each call on whichever replica nginx picks.
	served := map[string]int{}
	if _, text, isErr := call("exec", map[string]any{"code": "x = 0", "session_id": id}); isErr {
		t.Fatalf("x = 0: %s", text)
	}
	served[rec.last()]++
	for i := 1; i <= 6; i++ {
		out, text, isErr := call("exec", map[string]any{"code": "x += 1\nprint(x)", "session_id": id})
		served[rec.last()]++
		sess, _ := out["session"].(map[string]any)
		if isErr || out["stdout"] != fmt.Sprintf("%d\n", i) || sess["state"] != "kept" || sess["execution_count"] != float64(i+1) {
			t.Fatalf("call %d on %s: got stdout %q, session %v (%s)", i+1, rec.last(), out["stdout"], sess, text)
		}
	}
	t.Logf("seven calls of one session: %v", served)
	for addr, s := range byAddr {
		if served[addr] == 0 {
			t.Fatalf("replica %s (%s) served none of the session's calls (%v), want both under round-robin", s.Instance, addr, served)
		}
	}

	// Busy across replicas: a call sleeps; the next (round-robin: the other replica) is busy.
	slow := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "import time; time.sleep(5); print(x)", "session_id": id}})
		if err != nil {
			slow <- err.Error()
			return
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var o map[string]any
		_ = json.Unmarshal(raw, &o)
		s, _ := o["stdout"].(string)
		slow <- s
	}()
	time.Sleep(2 * time.Second)
	if _, text, isErr := call("exec", map[string]any{"code": "print(x)", "session_id": id}); !isErr || !strings.Contains(text, "busy") {
		t.Fatalf("a call while another runs: got %q (error %v), want busy", text, isErr)
	}
	if got := <-slow; got != "6\n" {
		t.Fatalf("the slow call: got %q, want 6", got)
	}

	// The creator dies (SIGKILL); the other replica serves the session as before.
	if err := creator.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-creator.Done()
	for i := 7; i <= 8; i++ {
		out, text, isErr := call("exec", map[string]any{"code": "x += 1\nprint(x)", "session_id": id})
		if isErr || out["stdout"] != fmt.Sprintf("%d\n", i) {
			t.Fatalf("after the creator's SIGKILL, call on %s: got %q (%s)", rec.last(), out["stdout"], text)
		}
		if byAddr[rec.last()] == creator {
			t.Fatalf("the killed replica answered")
		}
	}

	if _, text, _ := call("session_close", map[string]any{"session_id": id}); !strings.Contains(text, "closed: true") {
		t.Fatalf("session_close: %s", text)
	}
	if _, text, isErr := call("exec", map[string]any{"code": "print(x)", "session_id": id}); !isErr || !strings.Contains(text, "closed") || !strings.Contains(text, "session_create") {
		t.Fatalf("exec after session_close: got %q, want an error saying closed and to call session_create", text)
	}
	for deadline := time.Now().Add(30 * time.Second); len(pods()) != 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pods %v left after session_close, want none", pods())
		}
	}
	for _, s := range replicas {
		if strings.Contains(s.Logs.String(), id) || strings.Contains(s.Logs.String(), id[5:20]) {
			t.Errorf("replica %s logged the session handle", s.Instance)
		}
	}
}
