package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx-a
  context: {cluster: a, user: u, namespace: team-a}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`

func TestClientConfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ ctx, host string }{
		{"", "https://a.example:6443"},
		{"ctx-b", "https://b.example:6443"},
	}
	for _, tt := range tests {
		// Outside a pod there is no server namespace: the context's (team-a) is not one.
		cfg, podNS, err := ClientConfig(path, tt.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != tt.host || podNS != "" {
			t.Errorf("context %q: got %s %q, want %s and no pod namespace", tt.ctx, cfg.Host, podNS, tt.host)
		}
	}
	// KUBECONFIG is read when no file is named.
	t.Setenv("KUBECONFIG", path)
	if cfg, _, err := ClientConfig("", "ctx-b"); err != nil || cfg.Host != "https://b.example:6443" {
		t.Errorf("from KUBECONFIG: got %v, %v", cfg, err)
	}
	if _, _, err := ClientConfig(path, "nope"); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("unknown context: got %v, want an error naming the kubeconfig", err)
	}
}

// TestCheckNamespace: the sandboxes never share the server pod's namespace (its Secrets), and the
// name must be one Kubernetes takes.
func TestCheckNamespace(t *testing.T) {
	for _, tt := range []struct{ sandbox, pod, want string }{
		{"mcp-exec-sandbox", "mcp-exec", ""},
		{"mcp-exec-sandbox", "", ""},
		{"mcp-exec", "mcp-exec", "is the server pod's own namespace"},
		{"", "", "sandbox namespace \"\""},
		{"Sandbox", "", "RFC 1123"},
	} {
		err := CheckNamespace(tt.sandbox, tt.pod)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckNamespace(%q, %q): got %v, want %q", tt.sandbox, tt.pod, err, tt.want)
		}
	}
}
