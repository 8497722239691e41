package kube

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// tokenSecret is the Secret docs/deploy/kubernetes tells the deployer to create in the server's
// namespace (docs/kubernetes.md, "Running it").
const tokenSecret = "mcp-exec-token"

// attackPod is the attack on the manifests: whoever holds the server's ServiceAccount
// makes a pod that mounts the token Secret, with a service account token, without the sandbox
// labels (so no sandbox NetworkPolicy selects it), and otherwise "restricted", so that Pod
// Security admits it.
func attackPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "steal-", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "c", Image: testImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"python3", "-c", "print(open('/s/token').read())"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/s"}},
			}},
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tokenSecret}}}},
		},
	}
}

// badPods are sandbox pods as PodSpec makes them, each with one thing changed that the admission
// policy must refuse, and the attack pod.
func badPods(ns string) map[string]*corev1.Pod {
	sc := func(p *corev1.Pod) *corev1.SecurityContext { return p.Spec.Containers[0].SecurityContext }
	shm := func(p *corev1.Pod, src corev1.VolumeSource) { p.Spec.Volumes[1].VolumeSource = src }
	changes := map[string]func(p *corev1.Pod){
		"no labels":         func(p *corev1.Pod) { p.Labels = nil },
		"role not sandbox":  func(p *corev1.Pod) { p.Labels[backend.LabelRole] = "server" },
		"no instance label": func(p *corev1.Pod) { delete(p.Labels, backend.LabelInstance) },
		"secret volume": func(p *corev1.Pod) {
			shm(p, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tokenSecret}})
		},
		"configmap volume": func(p *corev1.Pod) {
			shm(p, corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}})
		},
		"hostPath volume": func(p *corev1.Pod) { shm(p, corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}) },
		"disk emptyDir": func(p *corev1.Pod) {
			shm(p, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(1<<20, resource.BinarySI)}})
		},
		"emptyDir without size": func(p *corev1.Pod) {
			shm(p, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}})
		},
		"projected token volume": func(p *corev1.Pod) {
			shm(p, corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}})
		},
		"another memory emptyDir": func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "other", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(1<<20, resource.BinarySI)}}})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "other", MountPath: "/other"})
		},
		"another volume": func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tokenSecret}}})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "token", MountPath: "/token"})
		},
		"automount token":       func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = ptr(true) },
		"automount unset":       func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil },
		"hostNetwork":           func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"hostPID":               func(p *corev1.Pod) { p.Spec.HostPID = true },
		"hostIPC":               func(p *corev1.Pod) { p.Spec.HostIPC = true },
		"shareProcessNamespace": func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr(true) },
		"privileged":            func(p *corev1.Pod) { sc(p).Privileged, sc(p).AllowPrivilegeEscalation = ptr(true), ptr(true) },
		"privilege escalation":  func(p *corev1.Pod) { sc(p).AllowPrivilegeEscalation = ptr(true) },
		"writable root":         func(p *corev1.Pod) { sc(p).ReadOnlyRootFilesystem = ptr(false) },
		"capability added":      func(p *corev1.Pod) { sc(p).Capabilities.Add = []corev1.Capability{"SYS_ADMIN"} },
		"capabilities kept":     func(p *corev1.Pod) { sc(p).Capabilities = nil },
		"root": func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsUser, p.Spec.SecurityContext.RunAsNonRoot = ptr(int64(0)), ptr(false)
			sc(p).RunAsUser, sc(p).RunAsNonRoot = ptr(int64(0)), ptr(false)
		},
		"no seccomp": func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile, sc(p).SeccompProfile = nil, nil },
		"unconfined seccomp": func(p *corev1.Pod) {
			sc(p).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		},
		"sysctls": func(p *corev1.Pod) {
			p.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}
		},
		"env from a secret": func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "T", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: tokenSecret}, Key: "token"}}})
		},
		"envFrom a configmap": func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}
		},
		"host port": func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		},
		"init container": func(p *corev1.Pod) {
			c := *p.Spec.Containers[0].DeepCopy()
			c.Name, c.Stdin, c.StdinOnce = "init", false, false
			p.Spec.InitContainers = []corev1.Container{c}
		},
		"second container": func(p *corev1.Pod) {
			c := *p.Spec.Containers[0].DeepCopy()
			c.Name = "second"
			p.Spec.Containers = append(p.Spec.Containers, c)
		},
	}
	out := map[string]*corev1.Pod{"the attack (unlabelled, the Secret, a token)": attackPod(ns)}
	for name, change := range changes {
		p := PodSpec(testSpec(), Options{Namespace: ns, PullPolicy: corev1.PullNever})
		change(p)
		out[name] = p
	}
	return out
}

// privilegedRefused reports whether err is the API server's own refusal of a privileged
// container: the test cluster's, like most, runs without --allow-privileged, so such a pod is
// invalid before admission, and the policy's rule for it is not reached there.
func privilegedRefused(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "privileged: Forbidden: disallowed by cluster policy")
}

// goodPods are pods as PodSpec makes them with every option the server has.
func goodPods(ns string) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for name, o := range map[string]Options{
		"defaults":          {},
		"Localhost seccomp": {SeccompProfile: "profiles/mcp-exec.json"},
		"placed, labelled": {NodeSelector: map[string]string{"kubernetes.io/hostname": "localhost"}, Labels: map[string]string{"team": "ai"},
			Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
		"user namespace": {UserNamespace: true},
	} {
		o.Namespace, o.PullPolicy = ns, corev1.PullNever
		out[name] = PodSpec(testSpec(), o)
	}
	s := testSpec()
	s.Runtime = gvisorRuntimeClass // up.sh applies it; admission checks that it exists
	out["RuntimeClass gvisor"] = PodSpec(s, Options{Namespace: ns, PullPolicy: corev1.PullNever})
	s = testSpec()
	s.EgressConns, s.EgressCABundle = nopEgress{}, []byte("-----BEGIN CERTIFICATE-----\n")
	out["inject rules (the CA bundle's emptyDir)"] = PodSpec(s, Options{Namespace: ns, PullPolicy: corev1.PullNever})
	return out
}

var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// policyTestNamespaces are namespaces without Pod Security, bound to the admission policy by a
// binding of the test's own, so that the policy is proven alone; in the second the sandboxes
// must run in user namespaces (the namespace label dev.mcp-exec.host-users=false). The test
// cluster is thrown away after its run: they are left in place (without a controller-manager a
// deleted namespace would stay Terminating).
var policyTestNamespaces = []string{"mcp-exec-admission-test", "mcp-exec-admission-test-userns"}

func bindPolicyToTestNamespaces(t *testing.T, admin clients) {
	t.Helper()
	cfg := adminConfig(t)
	for i, name := range policyTestNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if i == 1 {
			ns.Labels = map[string]string{"dev.mcp-exec.host-users": "false"}
		}
		if _, err := admin.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		ensureDefaultServiceAccount(t, admin, name)
	}
	var binding *unstructured.Unstructured
	for _, u := range readManifests(t)["admission.yaml"] {
		if u.GetKind() == "ValidatingAdmissionPolicyBinding" {
			binding = u.DeepCopy()
		}
	}
	if binding == nil {
		t.Fatal("admission.yaml has no ValidatingAdmissionPolicyBinding")
	}
	binding.SetName(policyName + "-test")
	values := make([]any, len(policyTestNamespaces))
	for i, n := range policyTestNamespaces {
		values[i] = n
	}
	sel := map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": values}}}
	if err := unstructured.SetNestedField(binding.Object, sel, "spec", "matchResources", "namespaceSelector"); err != nil {
		t.Fatal(err)
	}
	if err := applyManifest(t, cfg, binding, false); err != nil {
		t.Fatalf("binding the policy to the test namespaces: %v", err)
	}
	for _, n := range policyTestNamespaces {
		awaitPolicy(t, admin, n)
	}
}

// TestManifestsAdmission proves the ValidatingAdmissionPolicy of docs/deploy/kubernetes: alone (in a
// namespace without Pod Security) it refuses every pod not shaped like the backend's, naming
// itself, and admits the backend's pods with each of the server's options; in the sandbox
// namespace the server's ServiceAccount can create none of the bad pods and each of the good
// ones; where the namespace asks for user namespaces, a pod without hostUsers false is refused.
func TestManifestsAdmission(t *testing.T) {
	cfg := adminConfig(t)
	applyBase(t, cfg)
	admin := mustClients(cfg)
	sa := mustClients(asServiceAccount(cfg))
	bindPolicyToTestNamespaces(t, admin)
	alone, userns := policyTestNamespaces[0], policyTestNamespaces[1]

	t.Run("policy alone refuses", func(t *testing.T) {
		for name, pod := range badPods(alone) {
			_, err := admin.CoreV1().Pods(alone).Create(t.Context(), pod, dryRun)
			if !refusedByPolicy(err) && !(name == "privileged" && privilegedRefused(err)) {
				t.Errorf("%s: got %v, want the policy %s to refuse it", name, err, policyName)
			}
		}
	})
	t.Run("policy alone admits ours", func(t *testing.T) {
		for name, pod := range goodPods(alone) {
			if _, err := admin.CoreV1().Pods(alone).Create(t.Context(), pod, dryRun); err != nil {
				t.Errorf("%s: %v, want the backend's pod admitted", name, err)
			}
		}
	})
	t.Run("service account refused", func(t *testing.T) {
		for name, pod := range badPods(sandboxNamespace) {
			// A real create: should one be admitted, the test fails and removes it.
			p, err := sa.CoreV1().Pods(sandboxNamespace).Create(t.Context(), pod, metav1.CreateOptions{})
			if err == nil {
				_ = admin.CoreV1().Pods(sandboxNamespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
			}
			if !refusedByPolicy(err) && !(apierrors.IsForbidden(err) && strings.Contains(err.Error(), `violates PodSecurity "restricted`)) &&
				!(name == "privileged" && privilegedRefused(err)) {
				t.Errorf("%s: got %v, want the admission policy (or Pod Security) to refuse it", name, err)
			}
		}
	})
	t.Run("service account admitted", func(t *testing.T) {
		for name, pod := range goodPods(sandboxNamespace) {
			if _, err := sa.CoreV1().Pods(sandboxNamespace).Create(t.Context(), pod, dryRun); err != nil {
				t.Errorf("%s: %v, want the backend's pod admitted", name, err)
			}
		}
	})
	t.Run("service account updates annotations only", func(t *testing.T) {
		// A shared session's state is in its pod's annotations (shared.go): the Role
		// allows update of pods, and the policy admits an update that leaves the spec
		// and the labels as they were.
		p, err := sa.CoreV1().Pods(sandboxNamespace).Create(t.Context(), goodPods(sandboxNamespace)["defaults"], metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer admin.CoreV1().Pods(sandboxNamespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		update := func(change func(*corev1.Pod)) error {
			for try := 0; ; try++ {
				cur, err := sa.CoreV1().Pods(sandboxNamespace).Get(t.Context(), p.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				change(cur)
				_, err = sa.CoreV1().Pods(sandboxNamespace).Update(t.Context(), cur, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
				if !apierrors.IsConflict(err) || try == 5 { // the kubelet's status updates move the resourceVersion
					return err
				}
			}
		}
		if err := update(func(p *corev1.Pod) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations["dev.mcp-exec.session-count"] = "1"
		}); err != nil {
			t.Errorf("an update of annotations: %v, want admitted", err)
		}
		for name, change := range map[string]func(*corev1.Pod){
			"image":    func(p *corev1.Pod) { p.Spec.Containers[0].Image = "attacker/image:latest" },
			"deadline": func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(1)) },
			"toleration": func(p *corev1.Pod) {
				p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
			},
			"label":     func(p *corev1.Pod) { p.Labels[backend.LabelInstance] = "another-instance" },
			"new label": func(p *corev1.Pod) { p.Labels["extra"] = "x" },
		} {
			if err := update(change); !refusedByPolicy(err) {
				t.Errorf("an update of the pod's %s: got %v, want the policy %s to refuse it", name, err, policyName)
			}
		}
	})
	t.Run("user namespaces required", func(t *testing.T) {
		good := goodPods(userns)
		_, err := admin.CoreV1().Pods(userns).Create(t.Context(), good["defaults"], dryRun)
		if !refusedByPolicy(err) || !strings.Contains(err.Error(), "hostUsers") {
			t.Errorf("a pod sharing the node's user namespace: got %v, want the policy to refuse it, naming hostUsers", err)
		}
		if _, err := admin.CoreV1().Pods(userns).Create(t.Context(), good["user namespace"], dryRun); err != nil {
			t.Errorf("a pod with hostUsers false: %v, want it admitted", err)
		}
	})
}

// TestManifestsSecretUnreachable is the attack on the manifests, as the server's
// ServiceAccount: with the token Secret in the server's namespace, the account can neither
// read it nor make a pod there that mounts it, and in the sandbox namespace (which holds no
// Secret) such a pod is refused.
func TestManifestsSecretUnreachable(t *testing.T) {
	cfg := adminConfig(t)
	applyBase(t, cfg)
	admin := mustClients(cfg)
	sa := mustClients(asServiceAccount(cfg))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tokenSecret}, StringData: map[string]string{"token": "not-a-real-token"}}
	if _, err := admin.CoreV1().Secrets(serverNamespace).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	if _, err := sa.CoreV1().Secrets(serverNamespace).Get(t.Context(), tokenSecret, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading the Secret %s/%s as the ServiceAccount: got %v, want forbidden", serverNamespace, tokenSecret, err)
	}
	for _, ns := range []string{serverNamespace, sandboxNamespace} {
		p, err := sa.CoreV1().Pods(ns).Create(t.Context(), attackPod(ns), metav1.CreateOptions{})
		if err == nil {
			_ = admin.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
			t.Errorf("the ServiceAccount made pod %s/%s, which mounts the Secret %s; want it refused", ns, p.Name, tokenSecret)
			continue
		}
		want := apierrors.IsForbidden(err) // RBAC, in the server's namespace
		if ns == sandboxNamespace {
			want = refusedByPolicy(err)
		}
		if !want {
			t.Errorf("the attack pod in %s: got %v, want refused (RBAC in the server's namespace, the admission policy in the sandboxes')", ns, err)
		}
	}
	// Nothing to steal in the sandbox namespace.
	l, err := admin.CoreV1().Secrets(sandboxNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 0 {
		t.Errorf("Secrets in %s: got %d, %v; want none", sandboxNamespace, len(l.Items), err)
	}
}
