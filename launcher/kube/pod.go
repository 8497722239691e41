package kube

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Options configure the pods a Backend makes. Zero values take the defaults named on each field.
type Options struct {
	// Namespace of the sandbox pods, a namespace of their own (never the server's, which
	// holds its Secrets); "" is DefaultNamespace, docs/deploy/kubernetes' sandbox namespace.
	Namespace string
	// UserNamespace runs each pod in a user namespace of its own (hostUsers: false): root
	// in the pod, were it ever reached, is not root on the node. Every node that runs
	// sandboxes must support it (Kubernetes 1.33+, containerd 2.0+ or CRI-O 1.25+, runc
	// 1.2+ or crun 1.9+, Linux 6.3+ for tmpfs idmap mounts); the test cluster's containerd
	// 1.6 does not.
	UserNamespace bool
	// PullPolicy of the sandbox image; "" is IfNotPresent.
	PullPolicy corev1.PullPolicy
	// NodeSelector and Tolerations place the sandboxes (e.g. on a gVisor node pool).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Labels are added to every pod, beside the ownership labels (which they may not
	// replace). They are the deployer's, fixed at start: never caller data.
	Labels map[string]string
	// SeccompProfile is a Localhost profile, a path relative to the kubelet's seccomp
	// directory; "" is the runtime's default profile (RuntimeDefault).
	SeccompProfile string
	// EphemeralStorage bounds what a pod may write to the node's disk (its writable
	// layer, logs and the kubelet's files for it); 0 is 64 MiB.
	EphemeralStorage int64
	// ActiveDeadline is the backstop behind the launcher's own timeout: the kubelet kills a
	// pod that has run this long, even if the server died; 0 is one hour. It counts from
	// the pod's start, so it must cover a warm pod's wait in the pool as well as its exec.
	ActiveDeadline time.Duration
	// StartTimeout bounds scheduling, image and container start of one pod; 0 is 2 minutes.
	StartTimeout time.Duration
}

// DefaultNamespace is the sandbox namespace of docs/deploy/kubernetes (namespace.yaml): pods only,
// no Secret, and an admission policy that admits only pods shaped like PodSpec's.
const DefaultNamespace = "mcp-exec-sandbox"

const (
	containerName           = "sandbox"
	defaultEphemeralStorage = 64 << 20
	defaultActiveDeadline   = time.Hour
	defaultStartTimeout     = 2 * time.Minute
	// podNamePrefix: the API server appends a random suffix (GenerateName). Nothing of the
	// caller, and not the instance (whose characters a name may not hold), is in a name.
	podNamePrefix = "mcp-exec-sandbox-"
	// startGate is the container's first program: it waits for its line on stdin, which
	// Start sends once the attach is in place, then becomes the bootstrap (same PID 1). A
	// pod runs as soon as it is scheduled, long before anyone attaches, and what a
	// container writes while nobody is attached is lost to the attach (the bootstrap
	// writes its ready frame early). Fixed text, nothing of any job.
	// The line is the pod's seal key in hex (seal.go): read one byte at a time (the rest of
	// stdin is the bootstrap's), bounded, checked, else exit 70. The key goes to the
	// bootstrap through a pipe whose descriptor a last argument names (seal-fd=N), never
	// through the environment (boot.py, SEAL_LABEL, says why: not even the descriptor's
	// number, since the sandbox's environment is the Spec's alone).
	// It also drops the KUBERNETES_SERVICE_* and KUBERNETES_PORT* variables, which the
	// kubelet sets in every container whatever enableServiceLinks says: the sandbox's
	// environment is the Spec's alone.
	startGate = `import os, sys
line = b''
while not line.endswith(b'\n'):
    b = os.read(0, 1)
    if not b or len(line) > 64:
        os._exit(70)
    line += b
key = line[:-1]
if len(key) != 64 or key.strip(b'0123456789abcdef'):
    os._exit(70)
r, w = os.pipe()
os.write(w, bytes.fromhex(key.decode()))
os.close(w)
os.set_inheritable(r, True)
env = {k: v for k, v in os.environ.items() if not k.startswith(('KUBERNETES_SERVICE_', 'KUBERNETES_PORT'))}
os.execvpe(sys.argv[1], sys.argv[1:] + ['seal-fd=%d' % r], env)`
	// noDNS is the only nameserver a sandbox is given: its own loopback, where nothing
	// listens, so every lookup fails at once, with or without a network.
	noDNS = "127.0.0.1"
)

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.PullPolicy == "" {
		o.PullPolicy = corev1.PullIfNotPresent
	}
	if o.EphemeralStorage == 0 {
		o.EphemeralStorage = defaultEphemeralStorage
	}
	if o.ActiveDeadline == 0 {
		o.ActiveDeadline = defaultActiveDeadline
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = defaultStartTimeout
	}
	return o
}

// validate reports settings no pod could be made with, naming the setting.
func (o Options) validate(spec backend.Spec) error {
	if spec.EgressDir != "" {
		return errors.New("an egress channel's host socket cannot reach a pod: on the Kubernetes backend the server's egress proxy has no socket directory, and the backend carries a pod's connections (Spec.EgressConns)")
	}
	for k, v := range spec.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("label %s=%q is not a valid Kubernetes label value (the instance name must end in a letter or digit, at most 63 characters): %s", k, v, strings.Join(errs, "; "))
		}
	}
	for k, v := range o.Labels {
		if _, own := spec.Labels[k]; own || strings.HasPrefix(k, "dev.mcp-exec.") {
			return fmt.Errorf("extra pod label %q: the dev.mcp-exec. labels are the server's own", k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("extra pod label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("extra pod label %s=%q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	switch o.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("image pull policy %q: want Always, IfNotPresent or Never", o.PullPolicy)
	}
	return nil
}

// PodSpec is the whole hardening of a sandbox pod: one pure function from the
// backend-neutral spec and the deployer's options (defaults applied) to the Pod. Nothing of
// any job is in it: code, stdin and files arrive over the attach stream.
func PodSpec(spec backend.Spec, o Options) *corev1.Pod {
	o = o.withDefaults()
	labels := maps.Clone(o.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, spec.Labels) // the ownership labels win
	uid, gid := int64(spec.UID), int64(spec.GID)
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if o.SeccompProfile != "" {
		seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr(o.SeccompProfile)}
	}
	var runtimeClass *string
	if spec.Runtime != "" {
		runtimeClass = ptr(spec.Runtime)
	}
	var hostUsers *bool // unset: the node's user namespace (the API's default)
	if o.UserNamespace {
		hostUsers = ptr(false)
	}
	res := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(spec.Memory, resource.BinarySI),
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(math.Ceil(spec.CPUs*1000)), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(o.EphemeralStorage, resource.BinarySI),
	}
	tmpfs := resource.NewQuantity(spec.TmpfsSize, resource.BinarySI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: podNamePrefix,
			Namespace:    o.Namespace,
			Labels:       labels,
			Annotations:  maps.Clone(spec.Annotations),
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         ptr(int64(o.ActiveDeadline / time.Second)),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			HostNetwork:                   false,
			HostPID:                       false,
			HostIPC:                       false,
			ShareProcessNamespace:         ptr(false),
			HostUsers:                     hostUsers,
			Hostname:                      spec.Hostname,
			DNSPolicy:                     corev1.DNSNone,
			DNSConfig:                     &corev1.PodDNSConfig{Nameservers: []string{noDNS}},
			RuntimeClassName:              runtimeClass,
			NodeSelector:                  maps.Clone(o.NodeSelector),
			Tolerations:                   append([]corev1.Toleration(nil), o.Tolerations...),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:      &uid,
				RunAsGroup:     &gid,
				RunAsNonRoot:   ptr(true),
				SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           spec.Image,
				ImagePullPolicy: o.PullPolicy,
				Command:         gated(spec.Command),
				Env:             envVars(spec.Env),
				WorkingDir:      spec.WorkDir,
				Stdin:           true,
				// A shared session's pod is attached once per call, by any replica:
				// its stdin must outlive each attach.
				StdinOnce: spec.Labels[backend.LabelSessionKey] == "",
				TTY:       false,
				Resources: corev1.ResourceRequirements{Limits: res, Requests: res.DeepCopy()},
				// The kubelet copies this file into the pod's status; FallbackToLogsOnError
				// would copy the end of the output there. The kubelet binds it, mode 0666,
				// from the node's disk: at its default /dev/termination-log a program
				// could write there (caller data on the node's disk and in the API). In
				// root's home (0700) the sandbox's user cannot reach it; the bootstrap
				// refuses to run a program if it can (an image without such a /root).
				TerminationMessagePath:   terminationMessagePath,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                &uid,
					RunAsGroup:               &gid,
					RunAsNonRoot:             ptr(true),
					Privileged:               ptr(false),
					AllowPrivilegeEscalation: ptr(false),
					ReadOnlyRootFilesystem:   ptr(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           seccomp,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "tmp", MountPath: spec.WorkDir},
					{Name: "shm", MountPath: "/dev/shm"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tmpfs}}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(tmpfs.DeepCopy())}}},
			},
		},
	}
}

// terminationMessagePath is where the kubelet binds the container's termination-message
// file: below a directory (root's home, mode 0700 in the sandbox image, as in Debian's
// and most others) that the sandbox's user cannot enter, so no program can write it.
const terminationMessagePath = "/root/termination-log"

// gated runs command behind startGate, with the same interpreter.
func gated(command []string) []string {
	if len(command) == 0 {
		return nil
	}
	return append([]string{command[0], "-I", "-c", startGate}, command...)
}

func envVars(env []string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
