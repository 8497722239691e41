package kube

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ClientConfig finds the API server and credentials the way kubectl does. Inside a pod (and
// with no kubeconfig named) it uses the pod's ServiceAccount; otherwise the kubeconfig file
// (kubeconfig, else $KUBECONFIG, else ~/.kube/config) and its context (kubeContext, else the
// current one). namespace is the pod's own, or the context's, or "default".
func ClientConfig(kubeconfig, kubeContext string) (cfg *rest.Config, namespace string, err error) {
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
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig context's namespace: %w", err)
	}
	return cfg, ns, nil
}
