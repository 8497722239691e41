package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
)

// TestReadyzKubernetesUnreachable: on the Kubernetes backend, an API server that does not
// answer makes /readyz 503 "engine unreachable" (naming nothing of the deployment), and a
// call an infrastructure error that names the API server.
func TestReadyzKubernetesUnreachable(t *testing.T) {
	be, err := kube.New(&rest.Config{Host: "https://127.0.0.1:1"}, kube.Options{Namespace: kube.DefaultNamespace}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l, err := launcher.New(be, launcher.Options{Image: "mcp-exec/python-sandbox:v1", Instance: "readyz-kube", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	rec := httptest.NewRecorder()
	readyHandler(l).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || strings.TrimSpace(rec.Body.String()) != "not ready: engine unreachable" {
		t.Errorf("/readyz: got %d %q, want 503 \"not ready: engine unreachable\"", rec.Code, rec.Body.String())
	}
	_, err = l.Run(t.Context(), launcher.Job{Code: "print(1)"})
	if err == nil || !strings.Contains(err.Error(), "Kubernetes API server https://127.0.0.1:1") {
		t.Errorf("Run: got %v, want an error naming the Kubernetes API server", err)
	}
}
