package kube

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// envKubeconfig names the admin kubeconfig of a test cluster (scripts/k8s/up.sh writes one).
// Unset, the tests that need a cluster skip; set, the cluster must answer (scripts/test.sh sets
// it after bringing the cluster up, so there a missing cluster fails).
const envKubeconfig = "MCP_EXEC_TEST_KUBECONFIG"

// The namespaces of docs/deploy/kubernetes: the server's (its ServiceAccount, its token Secret), and
// the sandboxes', where the tests run their pods (the backend's default).
const (
	serverNamespace  = "mcp-exec"
	sandboxNamespace = DefaultNamespace
)

// adminConfig returns the test cluster's admin configuration, or skips the test.
func adminConfig(t testing.TB) *rest.Config {
	t.Helper()
	path := os.Getenv(envKubeconfig)
	if path == "" {
		t.Skipf("%s is not set: no test cluster (scripts/k8s/up.sh brings one up)", envKubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading %s=%s: %v", envKubeconfig, path, err)
	}
	cs, err := newClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().RESTClient().Get().AbsPath("/version").DoRaw(t.Context()); err != nil {
		t.Fatalf("the test cluster (%s=%s) does not answer: %v", envKubeconfig, path, err)
	}
	return cfg
}

// serviceAccount is the server's ServiceAccount, as the API server names its user.
const serviceAccount = "system:serviceaccount:" + serverNamespace + ":mcp-exec"

// asServiceAccount returns cfg impersonating the server's ServiceAccount, so that every request
// made with it is authorized by the Role of docs/deploy/kubernetes and nothing else.
func asServiceAccount(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
	return c
}
