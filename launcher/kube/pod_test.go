package kube

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

func testSpec() backend.Spec {
	return backend.Spec{
		Image:    "mcp-exec/python-sandbox:v1",
		Command:  []string{"python3", "-I", "-c", "boot", "parent"},
		Env:      []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "A=b=c"},
		UID:      65532,
		GID:      65532,
		WorkDir:  "/tmp",
		Hostname: "sandbox",
		Labels:   map[string]string{backend.LabelRole: backend.RoleSandbox, backend.LabelInstance: "test-1"},
		Memory:   256 << 20, Pids: 128, CPUs: 0.5, TmpfsSize: 64 << 20,
	}
}

func TestPodSpecHardening(t *testing.T) {
	pod := PodSpec(testSpec(), Options{Namespace: "ns1"})
	s := pod.Spec
	c := s.Containers[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"namespace", pod.Namespace, "ns1"},
		{"generateName", pod.GenerateName, "mcp-exec-sandbox-"},
		{"name", pod.Name, ""},
		{"restartPolicy", s.RestartPolicy, corev1.RestartPolicyNever},
		{"activeDeadlineSeconds", *s.ActiveDeadlineSeconds, int64(3600)},
		{"terminationGracePeriodSeconds", *s.TerminationGracePeriodSeconds, int64(0)},
		{"automountServiceAccountToken", *s.AutomountServiceAccountToken, false},
		{"enableServiceLinks", *s.EnableServiceLinks, false},
		{"hostNetwork", s.HostNetwork, false},
		{"hostPID", s.HostPID, false},
		{"hostIPC", s.HostIPC, false},
		{"shareProcessNamespace", *s.ShareProcessNamespace, false},
		{"dnsPolicy", s.DNSPolicy, corev1.DNSNone},
		{"dnsConfig", *s.DNSConfig, corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}}},
		{"runtimeClassName", s.RuntimeClassName, (*string)(nil)},
		{"pod runAsUser", *s.SecurityContext.RunAsUser, int64(65532)},
		{"pod runAsGroup", *s.SecurityContext.RunAsGroup, int64(65532)},
		{"pod runAsNonRoot", *s.SecurityContext.RunAsNonRoot, true},
		{"pod seccomp", *s.SecurityContext.SeccompProfile, corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		{"containers", len(s.Containers), 1},
		{"init containers", len(s.InitContainers), 0},
		{"image", c.Image, "mcp-exec/python-sandbox:v1"},
		{"pull policy", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"command", c.Command, []string{"python3", "-I", "-c", startGate, "python3", "-I", "-c", "boot", "parent"}},
		{"no CA bundle: no egress volume", len(s.Volumes), 2},
		{"args", len(c.Args), 0},
		{"env", c.Env, []corev1.EnvVar{{Name: "PATH", Value: "/usr/bin:/bin"}, {Name: "HOME", Value: "/tmp"}, {Name: "A", Value: "b=c"}}},
		{"envFrom", len(c.EnvFrom), 0},
		{"workingDir", c.WorkingDir, "/tmp"},
		{"stdin", c.Stdin, true},
		{"stdinOnce", c.StdinOnce, true},
		{"tty", c.TTY, false},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"terminationMessagePath (root's 0700 home: no program can write it)", c.TerminationMessagePath, "/root/termination-log"},
		{"runAsUser", *c.SecurityContext.RunAsUser, int64(65532)},
		{"runAsNonRoot", *c.SecurityContext.RunAsNonRoot, true},
		{"privileged", *c.SecurityContext.Privileged, false},
		{"allowPrivilegeEscalation", *c.SecurityContext.AllowPrivilegeEscalation, false},
		{"readOnlyRootFilesystem", *c.SecurityContext.ReadOnlyRootFilesystem, true},
		{"capabilities", *c.SecurityContext.Capabilities, corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		{"ports", len(c.Ports), 0},
		{"probes", c.LivenessProbe == nil && c.ReadinessProbe == nil && c.StartupProbe == nil, true},
		{"labels", pod.Labels, map[string]string{backend.LabelRole: backend.RoleSandbox, backend.LabelInstance: "test-1"}},
		{"annotations", len(pod.Annotations), 0},
	}
	for _, ch := range checks {
		if diff := cmp.Diff(ch.want, ch.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ch.name, diff)
		}
	}

	// Limits equal requests (Guaranteed QoS: no overcommit of the node for a sandbox).
	want := corev1.ResourceList{
		corev1.ResourceMemory:           resource.MustParse("256Mi"),
		corev1.ResourceCPU:              resource.MustParse("500m"),
		corev1.ResourceEphemeralStorage: resource.MustParse("64Mi"),
	}
	for _, rl := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		for k, q := range want {
			if got := rl[k]; got.Cmp(q) != 0 {
				t.Errorf("resource %s: got %s, want %s", k, got.String(), q.String())
			}
		}
		if len(rl) != len(want) {
			t.Errorf("resources: got %v, want exactly %v", rl, want)
		}
	}

	// Volumes: only memory-backed emptyDirs with a size; no hostPath or anything else.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if diff := cmp.Diff(map[string]string{"tmp": "/tmp", "shm": "/dev/shm"}, mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	for _, v := range s.Volumes {
		ed := v.EmptyDir
		if ed == nil || v.HostPath != nil || ed.Medium != corev1.StorageMediumMemory || ed.SizeLimit == nil || ed.SizeLimit.Value() != 64<<20 {
			t.Errorf("volume %s: got %+v, want an emptyDir of medium Memory with sizeLimit 64Mi", v.Name, v.VolumeSource)
		}
	}
	if len(s.Volumes) != 2 {
		t.Errorf("volumes: got %d, want 2", len(s.Volumes))
	}
}

func TestPodSpecOptions(t *testing.T) {
	spec := testSpec()
	spec.Runtime = "gvisor"
	tol := []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	pod := PodSpec(spec, Options{
		PullPolicy: corev1.PullNever, NodeSelector: map[string]string{"pool": "sandbox"}, Tolerations: tol,
		Labels:         map[string]string{"team": "ai", backend.LabelInstance: "forged"},
		SeccompProfile: "profiles/mcp-exec.json", EphemeralStorage: 1 << 30, ActiveDeadline: 10 * time.Minute,
	})
	s := pod.Spec
	if got := *s.RuntimeClassName; got != "gvisor" {
		t.Errorf("runtimeClassName: got %q, want gvisor", got)
	}
	if pod.Namespace != DefaultNamespace {
		t.Errorf("namespace: got %q, want %s", pod.Namespace, DefaultNamespace)
	}
	if s.HostUsers != nil {
		t.Errorf("hostUsers: got %v, want unset (the node's user namespace) without UserNamespace", *s.HostUsers)
	}
	if hu := PodSpec(spec, Options{UserNamespace: true}).Spec.HostUsers; hu == nil || *hu {
		t.Errorf("hostUsers with UserNamespace: got %v, want false", hu)
	}
	if diff := cmp.Diff(map[string]string{"pool": "sandbox"}, s.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tol, s.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	if got := s.Containers[0].ImagePullPolicy; got != corev1.PullNever {
		t.Errorf("pull policy: got %s, want Never", got)
	}
	if got := pod.Labels[backend.LabelInstance]; got != "test-1" {
		t.Errorf("instance label: got %q, want the server's own (test-1): an extra label may not replace it", got)
	}
	if got := pod.Labels["team"]; got != "ai" {
		t.Errorf("extra label team: got %q, want ai", got)
	}
	wantSec := corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("profiles/mcp-exec.json")}
	for _, sp := range []*corev1.SeccompProfile{s.SecurityContext.SeccompProfile, s.Containers[0].SecurityContext.SeccompProfile} {
		if diff := cmp.Diff(wantSec, *sp); diff != "" {
			t.Errorf("seccomp (-want +got):\n%s", diff)
		}
	}
	if got := *s.ActiveDeadlineSeconds; got != 600 {
		t.Errorf("activeDeadlineSeconds: got %d, want 600", got)
	}
	if got := s.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage]; got.Value() != 1<<30 {
		t.Errorf("ephemeral-storage: got %s, want 1Gi", got.String())
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		inst  string
		inErr string
	}{
		{"ok", Options{Labels: map[string]string{"team": "ai"}}, "host-1", ""},
		{"instance ends badly", Options{}, "host-", "instance name"},
		{"own label", Options{Labels: map[string]string{"dev.mcp-exec.role": "x"}}, "h", "server's own"},
		{"bad key", Options{Labels: map[string]string{"a b": "x"}}, "h", "extra pod label key"},
		{"bad value", Options{Labels: map[string]string{"a": "x y"}}, "h", "extra pod label a="},
		{"pull policy", Options{PullPolicy: "Sometimes"}, "h", "image pull policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			spec.Labels[backend.LabelInstance] = tt.inst
			err := tt.opts.withDefaults().validate(spec)
			if tt.inErr == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.inErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.inErr)
			}
		})
	}
}

// TestPodSpecBundle: only a pod whose profile has inject rules (Spec.EgressCABundle)
// has the emptyDir "egress" at /egress, memory-backed and small, and a gate told to
// write the bundle there; no bundle without a channel, nor one past the limit.
func TestPodSpecBundle(t *testing.T) {
	if maxCABundleText != strconv.Itoa(maxCABundle) {
		t.Fatalf("maxCABundleText %s, want %d", maxCABundleText, maxCABundle)
	}
	plain := testSpec()
	plain.EgressConns = nopEgress{}
	inject := plain
	inject.EgressCABundle = []byte("-----BEGIN CERTIFICATE-----\n")
	for _, tc := range []struct {
		name   string
		spec   backend.Spec
		mounts map[string]string
		gate   []string
	}{
		{"profile without rules", plain, map[string]string{"tmp": "/tmp", "shm": "/dev/shm"}, nil},
		{"profile with rules", inject, map[string]string{"tmp": "/tmp", "shm": "/dev/shm", "egress": "/egress"}, []string{"--ca-bundle=/egress/ca-bundle.pem"}},
	} {
		c := PodSpec(tc.spec, Options{}).Spec.Containers[0]
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		if diff := cmp.Diff(tc.mounts, mounts); diff != "" {
			t.Errorf("%s: mounts (-want +got):\n%s", tc.name, diff)
		}
		want := append(append([]string{"python3", "-I", "-c", startGate}, tc.gate...), tc.spec.Command...)
		if diff := cmp.Diff(want, c.Command); diff != "" {
			t.Errorf("%s: command (-want +got):\n%s", tc.name, diff)
		}
	}
	for _, v := range PodSpec(inject, Options{}).Spec.Volumes {
		if ed := v.EmptyDir; v.Name == "egress" && (ed == nil || ed.Medium != corev1.StorageMediumMemory || ed.SizeLimit.Value() != 1<<20) {
			t.Errorf("volume egress: got %+v, want an emptyDir of medium Memory with sizeLimit 1Mi", v.VolumeSource)
		}
	}
	lone := testSpec()
	lone.EgressCABundle = inject.EgressCABundle
	big := inject
	big.EgressCABundle = make([]byte, maxCABundle+1)
	for name, spec := range map[string]backend.Spec{"without a channel": lone, "too big": big} {
		if err := (Options{}).withDefaults().validate(spec); err == nil {
			t.Errorf("a CA bundle %s: validate passed, want an error", name)
		}
	}
}

type nopEgress struct{}

func (nopEgress) ServeEgress(c net.Conn) { c.Close() }
