package kube

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

const manifestDir = "../../docs/deploy/kubernetes"

// readManifests decodes every object of every YAML file in docs/deploy/kubernetes except the
// kustomization, keyed by file.
func readManifests(t testing.TB) map[string][]*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	out := map[string][]*unstructured.Unstructured{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("decoding %s: %v", f, err)
			}
			if len(u.Object) > 0 {
				out[filepath.Base(f)] = append(out[filepath.Base(f)], &u)
			}
		}
	}
	return out
}

// TestManifestsListed checks that the kustomization names every manifest (no cluster needed).
func TestManifestsListed(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for f := range readManifests(t) {
		if !strings.Contains(string(data), "- "+f+"\n") {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
}

// applyManifest server-side applies one object; dryRun leaves the cluster unchanged.
func applyManifest(t testing.TB, cfg *rest.Config, u *unstructured.Unstructured, dryRun bool) error {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if ns := u.GetNamespace(); ns != "" {
		ri = dyn.Resource(m.Resource).Namespace(ns)
	}
	opts := metav1.ApplyOptions{FieldManager: "mcp-exec-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Apply(t.Context(), u.GetName(), u, opts)
	return err
}

// applyBase applies, for real, what the other tests need: the namespaces (and in each the
// ServiceAccount "default" that pod admission needs and no controller creates on the test
// cluster), the server's ServiceAccount, the Role and its binding, the admission policy and its
// binding, and the NetworkPolicy; then it waits until the policy is enforced.
func applyBase(t testing.TB, cfg *rest.Config) {
	t.Helper()
	ms := readManifests(t)
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "admission.yaml", "networkpolicy.yaml"} {
		for _, u := range ms[f] {
			if err := applyManifest(t, cfg, u, false); err != nil {
				t.Fatalf("applying %s %s from %s: %v", u.GetKind(), u.GetName(), f, err)
			}
		}
	}
	cs := mustClients(cfg)
	for _, ns := range []string{serverNamespace, sandboxNamespace} {
		ensureDefaultServiceAccount(t, cs, ns)
	}
	awaitPolicy(t, cs, sandboxNamespace)
}

// ensureDefaultServiceAccount creates the ServiceAccount default of ns, which pod admission needs.
func ensureDefaultServiceAccount(t testing.TB, cs clients, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the ServiceAccount default in %s: %v", ns, err)
	}
}

// policyName is the ValidatingAdmissionPolicy of docs/deploy/kubernetes/admission.yaml; the API
// server names it in every refusal.
const policyName = "mcp-exec-sandbox-pods"

// refusedByPolicy reports whether err is the admission policy's refusal.
func refusedByPolicy(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'")
}

// awaitPolicy waits until the API server enforces the admission policy in ns (it takes the policy
// and its binding from its informers, a moment after they are made): an unlabelled pod is refused.
func awaitPolicy(t testing.TB, cs clients, ns string) {
	t.Helper()
	pod := PodSpec(testSpec(), Options{Namespace: ns})
	pod.Labels = nil
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, err = cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if refusedByPolicy(err) {
			return
		}
	}
	t.Fatalf("the admission policy %s is not enforced in %s after 30 s: an unlabelled pod got %v", policyName, ns, err)
}

// TestManifestsDryRun applies every object of docs/deploy/kubernetes with a server-side dry run:
// the API server validates each against its schema and admission (Pod Security "restricted"
// for the namespace's pods, the Deployment's pod template included).
func TestManifestsDryRun(t *testing.T) {
	cfg := adminConfig(t)
	applyBase(t, cfg)
	ms := readManifests(t)
	var kinds []string
	for f, objs := range ms {
		for _, u := range objs {
			if err := applyManifest(t, cfg, u, true); err != nil {
				t.Errorf("dry-run apply of %s %s (%s): %v", u.GetKind(), u.GetName(), f, err)
			}
			kinds = append(kinds, u.GetKind())
		}
	}
	sort.Strings(kinds)
	want := []string{"Deployment", "Namespace", "Namespace", "NetworkPolicy", "Role", "RoleBinding", "Service", "ServiceAccount",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("manifest kinds (-want +got):\n%s", diff)
	}
}

// TestManifestsPodSecurity proves that both namespaces' Pod Security label is enforced by the API
// server: a pod that is not "restricted" is refused in each.
func TestManifestsPodSecurity(t *testing.T) {
	cfg := adminConfig(t)
	applyBase(t, cfg)
	cs := mustClients(cfg)
	for _, ns := range []string{serverNamespace, sandboxNamespace} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "not-restricted"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "mcp-exec/python-sandbox:v1"}}},
		}
		_, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
			t.Errorf("creating an unhardened pod in %s: got %v, want a Pod Security (restricted) refusal", ns, err)
		}
	}
}

type access struct {
	ns, verb, resource, sub string
}

func (a access) String() string {
	r := a.resource
	if a.sub != "" {
		r += "/" + a.sub
	}
	return a.verb + " " + r + " in " + a.ns
}

// can asks the API server whether the server's ServiceAccount may do a (a SubjectAccessReview,
// what `kubectl auth can-i --as=system:serviceaccount:mcp-exec:mcp-exec` asks). The account is of
// the server's namespace, whichever namespace it acts in.
func can(t *testing.T, cs clients, a access) bool {
	t.Helper()
	group := ""
	if a.resource == "deployments" {
		group = "apps"
	}
	sar := &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
		User:   serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + serverNamespace, "system:authenticated"},
		ResourceAttributes: &authv1.ResourceAttributes{
			Namespace: a.ns, Verb: a.verb, Group: group, Resource: a.resource, Subresource: a.sub,
		},
	}}
	got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("asking whether the ServiceAccount may %s: %v", a, err)
	}
	return got.Status.Allowed
}

// TestManifestsRBAC proves the Role allows what the backend does and nothing more: each request
// the backend makes is allowed in the sandbox namespace, a list of tempting others is denied
// there and everything is denied in the server's namespace (which holds the token Secret), and
// the ServiceAccount's complete set of resource rules is exactly the Role's plus the self-review
// rules every authenticated user has in the sandbox namespace, and those alone in the server's.
func TestManifestsRBAC(t *testing.T) {
	cfg := adminConfig(t)
	applyBase(t, cfg)
	cs := mustClients(cfg)
	ns, own := sandboxNamespace, serverNamespace
	for _, a := range []access{
		{ns, "create", "pods", ""}, {ns, "get", "pods", ""}, {ns, "list", "pods", ""},
		{ns, "watch", "pods", ""}, {ns, "delete", "pods", ""}, {ns, "create", "pods", "attach"},
		{ns, "update", "pods", ""},            // a shared session's state in its pod's annotations (shared.go)
		{ns, "create", "pods", "portforward"}, // egress profiles: streams to a pod's relay (egress.go)
		{ns, "list", "events", ""},            // an unschedulable pod's: is a node being added for it (startwait.go)
	} {
		if !can(t, cs, a) {
			t.Errorf("the ServiceAccount may not %s; the backend needs it", a)
		}
	}
	denied := []access{
		{ns, "create", "pods", "exec"}, {ns, "get", "pods", "exec"}, {ns, "get", "pods", "log"},
		{ns, "get", "pods", "portforward"}, {ns, "patch", "pods", ""},
		{ns, "update", "pods", "status"}, {ns, "patch", "pods", "ephemeralcontainers"},
		{ns, "deletecollection", "pods", ""}, {ns, "get", "pods", "attach"},
		{ns, "get", "secrets", ""}, {ns, "list", "secrets", ""}, {ns, "create", "secrets", ""}, {ns, "get", "configmaps", ""},
		{ns, "create", "serviceaccounts", "token"}, {ns, "create", "deployments", ""},
		{ns, "create", "services", ""}, {ns, "update", "roles", ""},
		{ns, "create", "events", ""}, {ns, "delete", "events", ""}, {"default", "list", "events", ""},
		{"default", "create", "pods", ""}, {"default", "list", "pods", ""},
		{"kube-system", "get", "secrets", ""}, {"", "list", "nodes", ""}, {"", "list", "namespaces", ""},
		{"", "create", "pods", ""}, {"", "list", "pods", ""},
	}
	// The server's own namespace: not even the pods the backend may make elsewhere.
	for _, verb := range []string{"create", "get", "list", "watch", "delete", "update"} {
		denied = append(denied, access{own, verb, "pods", ""}, access{own, verb, "secrets", ""})
	}
	denied = append(denied, access{own, "create", "pods", "attach"}, access{own, "create", "pods", "exec"}, access{own, "create", "pods", "portforward"},
		access{own, "create", "deployments", ""}, access{own, "create", "serviceaccounts", "token"}, access{own, "get", "configmaps", ""})
	for _, a := range denied {
		if can(t, cs, a) {
			t.Errorf("the ServiceAccount may %s; it must not", a)
		}
	}

	// Everything it may do in each namespace, as the API server lists it for the ServiceAccount.
	selfReview := []string{ // system:basic-user, bound to every authenticated user by default
		"authentication.k8s.io/selfsubjectreviews:create",
		"authorization.k8s.io/selfsubjectaccessreviews:create",
		"authorization.k8s.io/selfsubjectrulesreviews:create",
	}
	for _, tt := range []struct {
		ns   string
		want []string
	}{
		{ns, append([]string{"/events:list", "/pods/attach:create", "/pods/portforward:create", "/pods:create", "/pods:delete", "/pods:get", "/pods:list", "/pods:update", "/pods:watch"}, selfReview...)},
		{own, selfReview},
	} {
		if diff := cmp.Diff(tt.want, rulesIn(t, cfg, tt.ns)); diff != "" {
			t.Errorf("the ServiceAccount's rules in %s (-want +got):\n%s", tt.ns, diff)
		}
	}
}

// rulesIn lists, sorted, every "group/resource:verb" the ServiceAccount may use in ns
// (SelfSubjectRulesReview, made as the ServiceAccount).
func rulesIn(t *testing.T, cfg *rest.Config, ns string) []string {
	t.Helper()
	sa := mustClients(asServiceAccount(cfg))
	rr, err := sa.AuthorizationV1().SelfSubjectRulesReviews().Create(t.Context(),
		&authv1.SelfSubjectRulesReview{Spec: authv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rr.Status.ResourceRules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					got = append(got, g+"/"+res+":"+v)
				}
			}
		}
	}
	sort.Strings(got)
	return got
}
