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
	tests := []struct{ ctx, host, ns string }{
		{"", "https://a.example:6443", "team-a"},
		{"ctx-b", "https://b.example:6443", "default"},
	}
	for _, tt := range tests {
		cfg, ns, err := ClientConfig(path, tt.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != tt.host || ns != tt.ns {
			t.Errorf("context %q: got %s %s, want %s %s", tt.ctx, cfg.Host, ns, tt.host, tt.ns)
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
