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
	// StartTimeout bounds scheduling, image and container start of one pod; 0 is
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// UnschedulableWait bounds how long a pod may stay unschedulable (no node has room
	// for its requests, and no pod can be preempted for it) before its start fails with
	// the scheduler's reason, unless the pod's events then say that a node autoscaler is
	// adding a node for it; 0 is 30 seconds, negative no bound but StartTimeout. A cluster
	// that has room places a pod within seconds of a deletion; one without would hold a
	// session_create silently until StartTimeout, past a client's usual request timeout
	// of 60 s.
	UnschedulableWait time.Duration
}

// DefaultNamespace is the sandbox namespace of docs/deploy/kubernetes (namespace.yaml): pods only,
// no Secret, and an admission policy that admits only pods shaped like PodSpec's.
const DefaultNamespace = "mcp-exec-sandbox"

// DefaultStartTimeout bounds a pod's start (Options.StartTimeout) unless set.
const DefaultStartTimeout = 2 * time.Minute

const (
	containerName           = "sandbox"
	defaultEphemeralStorage = 64 << 20
	defaultActiveDeadline   = time.Hour
	defaultUnschedulable    = 30 * time.Second
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
	// A pod whose profile has inject rules has gateBundleArg and a path before the
	// command: its gate then reads a second line, the CA bundle's length in decimal, and
	// that many bytes, which it writes to a new file at the path (bundlePath, in the
	// pod's emptyDir "egress", where the environment's SSL_CERT_FILE points) before it
	// becomes the bootstrap. The
	// bundle is public (certificates only); only the server's attach writes the gate's
	// lines, and the bootstrap reads nothing of stdin before them.
	startGate = `import os, sys
def line(most):
    s = b''
    while not s.endswith(b'\n'):
        b = os.read(0, 1)
        if not b or len(s) > most:
            os._exit(70)
        s += b
    return s[:-1]
key = line(64)
if len(key) != 64 or key.strip(b'0123456789abcdef'):
    os._exit(70)
args = sys.argv[1:]
if args[0].startswith('` + gateBundleArg + `'):
    path, args = args[0][len('` + gateBundleArg + `'):], args[1:]
    n = line(8)
    if not n.isdigit() or not 0 < int(n) <= ` + maxCABundleText + `:
        os._exit(70)
    n = int(n)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        while n:
            b = os.read(0, min(n, 65536))
            if not b:
                os._exit(70)
            n -= len(b)
            while b:
                b = b[os.write(fd, b):]
        os.close(fd)
    except OSError:
        os._exit(70)
r, w = os.pipe()
os.write(w, bytes.fromhex(key.decode()))
os.close(w)
os.set_inheritable(r, True)
env = {k: v for k, v in os.environ.items() if not k.startswith(('KUBERNETES_SERVICE_', 'KUBERNETES_PORT'))}
os.execvpe(args[0], args + ['seal-fd=%d' % r], env)`
	// gateBundleArg, first after the gate's program and followed by a path, makes it
	// read the CA bundle into a new file there.
	gateBundleArg = "--ca-bundle="
	// bundlePath is where a pod whose profile has inject rules has its CA bundle: the
	// path of the Docker backend's channel directory, here the pod's emptyDir "egress".
	bundlePath = backend.EgressMount + "/" + backend.EgressBundle
	// maxCABundle bounds the bundle the gate takes (a system trust store is about 200
	// KiB); the emptyDir that holds it is egressVolumeSize.
	maxCABundle      = 512 << 10
	maxCABundleText  = "524288"
	egressVolumeSize = 1 << 20
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
		o.StartTimeout = DefaultStartTimeout
	}
	if o.UnschedulableWait == 0 {
		o.UnschedulableWait = defaultUnschedulable
	}
	return o
}

// validate reports settings no pod could be made with, naming the setting.
func (o Options) validate(spec backend.Spec) error {
	if spec.EgressDir != "" {
		return errors.New("an egress channel's host socket cannot reach a pod: on the Kubernetes backend the server's egress proxy has no socket directory, and the backend carries a pod's connections (Spec.EgressConns)")
	}
	if len(spec.EgressCABundle) > 0 && spec.EgressConns == nil {
		return errors.New("a CA bundle for a pod without an egress channel (Spec.EgressCABundle needs Spec.EgressConns)")
	}
	if len(spec.EgressCABundle) > maxCABundle {
		return fmt.Errorf("the egress CA bundle is %d bytes, more than a pod takes (%d): the server's system trust store is unusually large; give the server a smaller one (SSL_CERT_FILE)", len(spec.EgressCABundle), maxCABundle)
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
	mounts := []corev1.VolumeMount{
		{Name: "tmp", MountPath: spec.WorkDir},
		{Name: "shm", MountPath: "/dev/shm"},
	}
	volumes := []corev1.Volume{
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tmpfs}}},
		{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(tmpfs.DeepCopy())}}},
	}
	bundle := len(spec.EgressCABundle) > 0
	if bundle {
		// The CA bundle's directory, which the gate writes (the root is read-only).
		// Memory-backed and the pod's own, like /tmp: it goes with the pod.
		mounts = append(mounts, corev1.VolumeMount{Name: egressVolume, MountPath: backend.EgressMount})
		volumes = append(volumes, corev1.Volume{Name: egressVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(egressVolumeSize, resource.BinarySI)}}})
	}
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
				Command:         gated(spec.Command, bundlePathIf(bundle)),
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
				VolumeMounts: mounts,
			}},
			Volumes: volumes,
		},
	}
}

// terminationMessagePath is where the kubelet binds the container's termination-message
// file: below a directory (root's home, mode 0700 in the sandbox image, as in Debian's
// and most others) that the sandbox's user cannot enter, so no program can write it.
const terminationMessagePath = "/root/termination-log"

// egressVolume is the emptyDir of a pod whose profile has inject rules, at
// backend.EgressMount: it holds the CA bundle.
const egressVolume = "egress"

// gated runs command behind startGate, with the same interpreter; with a bundle path,
// the gate writes the CA bundle there first.
func gated(command []string, bundle string) []string {
	if len(command) == 0 {
		return nil
	}
	g := []string{command[0], "-I", "-c", startGate}
	if bundle != "" {
		g = append(g, gateBundleArg+bundle)
	}
	return append(g, command...)
}

func bundlePathIf(bundle bool) string {
	if bundle {
		return bundlePath
	}
	return ""
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
