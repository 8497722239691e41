package kube

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ClientConfig finds the API server and credentials the way kubectl does. Inside a pod (and
// with no kubeconfig named) it uses the pod's ServiceAccount, and podNamespace is the pod's own
// namespace (the server's, which must not be the sandboxes': CheckNamespace); otherwise the
// kubeconfig file (kubeconfig, else $KUBECONFIG, else ~/.kube/config) and its context
// (kubeContext, else the current one), and podNamespace is "".
func ClientConfig(kubeconfig, kubeContext string) (cfg *rest.Config, podNamespace string, err error) {
	if kubeconfig == "" && kubeContext == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("using the pod's service account: %w", err)
		}
		ns := "default"
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
			ns = strings.TrimSpace(string(b))
		}
		return cfg, ns, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err = cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig (--kubeconfig, KUBECONFIG or ~/.kube/config): %w", err)
	}
	return cfg, "", nil
}

// CheckNamespace refuses a sandbox namespace that is not a valid namespace name, or that is the
// server pod's own (podNamespace; "" outside a pod): the server's namespace holds its token
// Secret, and a right to create pods there is a right to mount that Secret in one.
func CheckNamespace(sandbox, podNamespace string) error {
	if errs := validation.IsDNS1123Label(sandbox); len(errs) > 0 {
		return fmt.Errorf("sandbox namespace %q: %s", sandbox, strings.Join(errs, "; "))
	}
	if sandbox == podNamespace {
		return fmt.Errorf("sandbox namespace %q is the server pod's own namespace: the sandboxes need a namespace of their own, "+
			"where the server's Secrets are not and only sandbox-shaped pods are admitted (docs/deploy/kubernetes: %s)", sandbox, DefaultNamespace)
	}
	return nil
}
