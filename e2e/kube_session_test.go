package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
)

// TestKubeSessionServer: the binary on the Kubernetes backend of the test cluster offers
// sessions (a pod per session): x = 41 then print(x + 1); session_close deletes the pod
// and a later call says closed; a session left idle past --session-idle-timeout-s, and
// one used past --session-max-lifetime-s, end with a message that says so, and no pod
// of the instance is left after either.
func TestKubeSessionServer(t *testing.T) {
	kc, rc := e2e.KubeCluster(t)
	bin := e2e.Build(t)
	instance := "test-kube-sessions"
	list := kubeInstancePods(t, rc, instance) // the shared session pods too, which be.List leaves out
	token := e2e.Random()
	s := e2e.Serve(t, bin, e2e.Env("MCP_EXEC_BACKEND=kubernetes", "MCP_EXEC_KUBECONFIG="+kc,
		"MCP_EXEC_KUBE_NAMESPACE="+kube.DefaultNamespace, "MCP_EXEC_KUBE_IMAGE_PULL_POLICY=Never",
		"MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_SESSION_IDLE_TIMEOUT_S=4", "MCP_EXEC_SESSION_MAX_LIFETIME_S=12"),
		"http", instance, token)
	cs := s.Connect(t, nil, nil)

	call := kubeToolCaller(t, cs)
	create := func() string {
		t.Helper()
		out, text, isErr := call("session_create", map[string]any{})
		id, _ := out["session_id"].(string)
		if isErr || id == "" {
			t.Fatalf("session_create: %s", text)
		}
		return id
	}
	exec := func(id, code string) (string, string, bool) {
		t.Helper()
		out, text, isErr := call("exec", map[string]any{"code": code, "session_id": id})
		stdout, _ := out["stdout"].(string)
		return stdout, text, isErr
	}
	noPods := func(when string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); len(list()) != 0; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: pods %v left, want none", when, list())
			}
		}
	}

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"exec", "session_close", "session_create"}) {
		t.Fatalf("tools on the Kubernetes backend: got %v, want exec and the session tools", names)
	}

	a := create()
	if n := len(list()); n != 1 {
		t.Fatalf("after session_create: %d pods, want 1", n)
	}
	kubeNoHandleOnPods(t, rc, instance, a)
	if out, text, isErr := exec(a, "x = 41"); isErr || out != "" {
		t.Fatalf("x = 41: %s", text)
	}
	if out, text, isErr := exec(a, "print(x + 1)"); isErr || out != "42\n" {
		t.Fatalf("print(x + 1): got %q (%s), want 42", out, text)
	}
	if _, text, _ := call("session_close", map[string]any{"session_id": a}); !strings.Contains(text, "closed: true") {
		t.Fatalf("session_close: %s", text)
	}
	if _, text, isErr := exec(a, "print(x)"); !isErr || !strings.Contains(text, "closed") {
		t.Fatalf("exec after session_close: got %q, want an error saying closed", text)
	}
	noPods("after session_close")

	// Idle expiry: 4 s without a call.
	b := create()
	time.Sleep(6 * time.Second)
	if _, text, isErr := exec(b, "print(1)"); !isErr || !strings.Contains(text, "expired") || !strings.Contains(text, "idle") {
		t.Fatalf("exec after the idle timeout: got %q, want an error saying expired, idle", text)
	}
	noPods("after the idle expiry")

	// Maximum lifetime: calls every 2 s keep it from idling, not past 12 s from the
	// session_create call (the pod's start, 1-4 s, counts in it).
	t0 := time.Now()
	c := create()
	for time.Since(t0) < 14*time.Second {
		out, text, isErr := exec(c, "print('alive')")
		if isErr {
			if strings.Contains(text, "maximum lifetime") && time.Since(t0) > 10*time.Second {
				break
			}
			t.Fatalf("exec at %v: %s", time.Since(t0).Round(time.Second), text)
		}
		if out != "alive\n" {
			t.Fatalf("exec at %v: got %q", time.Since(t0).Round(time.Second), out)
		}
		time.Sleep(2 * time.Second)
	}
	if _, text, isErr := exec(c, "print(1)"); !isErr || !strings.Contains(text, "maximum lifetime") {
		t.Fatalf("exec after the maximum lifetime: got %q, want an error saying so", text)
	}
	noPods("after the maximum lifetime")
}

// kubeToolCaller calls tools on cs: the result's structured content as a map, its text,
// and whether it is a tool error; a protocol error fails the test.
func kubeToolCaller(t *testing.T, cs *mcp.ClientSession) func(name string, args map[string]any) (map[string]any, string, bool) {
	return func(name string, args map[string]any) (map[string]any, string, bool) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out, text, res.IsError
	}
}

// kubeInstancePods lists the names of instance's sandbox pods, shared session pods
// included (kube.Backend.List leaves those out: they are every replica's).
func kubeInstancePods(t *testing.T, rc *rest.Config, instance string) func() []string {
	cs := corev1client.NewForConfigOrDie(rc)
	return func() []string {
		pods, err := cs.Pods(kube.DefaultNamespace).List(t.Context(),
			metav1.ListOptions{LabelSelector: backend.LabelInstance + "=" + instance})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		return names
	}
}

// kubeNoHandleOnPods: nothing of the handle, not even the hash the logs carry, in the
// labels or annotations of instance's pods; a shared session's pod carries exactly the
// documented annotations (hashes, deadlines, its count, a claim).
func kubeNoHandleOnPods(t *testing.T, rc *rest.Config, instance, handle string) {
	t.Helper()
	pods, err := corev1client.NewForConfigOrDie(rc).Pods(kube.DefaultNamespace).List(t.Context(),
		metav1.ListOptions{LabelSelector: backend.LabelInstance + "=" + instance})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(handle))
	hash := hex.EncodeToString(sum[:6]) // what the logs say of it (mcpserver.handleHash)
	want := []string{"dev.mcp-exec.session-busy-by", "dev.mcp-exec.session-busy-until", "dev.mcp-exec.session-count",
		"dev.mcp-exec.session-expires-at", "dev.mcp-exec.session-handle-sha256", "dev.mcp-exec.session-idle-s",
		"dev.mcp-exec.session-idle-until", "dev.mcp-exec.session-owner-sha256", "dev.mcp-exec.session-owner-tag"}
	shared := 0
	for _, p := range pods.Items {
		meta := map[string]string{}
		maps.Copy(meta, p.Labels)
		maps.Copy(meta, p.Annotations)
		for k, v := range meta {
			if strings.Contains(k+"="+v, handle) || strings.Contains(k+"="+v, handle[5:20]) || strings.Contains(k+"="+v, hash) {
				t.Errorf("pod %s: %s=%s holds the handle", p.Name, k, v)
			}
		}
		if p.Labels[backend.LabelSessionKey] == "" {
			continue
		}
		shared++
		if got := slices.Sorted(maps.Keys(p.Annotations)); !slices.Equal(got, want) {
			t.Errorf("shared session pod %s: annotations %v, want %v", p.Name, got, want)
		}
	}
	if shared == 0 {
		t.Errorf("instance %s has no shared session pod (label %s)", instance, backend.LabelSessionKey)
	}
}
