package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/klog/v2"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/wire"
)

// Backend runs each sandbox as a Pod of a Kubernetes cluster, through its API server: it
// creates the pod from PodSpec, waits for it to run, attaches stdin, stdout and stderr
// (pods/attach, SPDY), and deletes it. It satisfies launcher.Backend. Its requests are exactly
// those the Role in docs/deploy/kubernetes allows.
type Backend struct {
	cfg *rest.Config
	// core is client-go's typed client of the core/v1 API group, the one group the backend
	// calls (pods, their attach and portforward, and /version through its REST client): not
	// the whole clientset, whose other groups would add about a hundred packages to every
	// build of the server.
	core corev1client.CoreV1Interface
	opts Options
	log  zerolog.Logger

	mu     sync.Mutex
	egress map[string]podEgress // pods made with Spec.EgressConns, until started or removed
}

// podEgress is what Start gives a pod made with an egress channel: the channel's
// streams, and the CA bundle its gate writes (nil: the profile has no inject rules).
type podEgress struct {
	srv    backend.EgressServer
	bundle []byte
}

// New returns a Backend that talks to the API server of cfg. It does not contact it.
func New(cfg *rest.Config, opts Options, log zerolog.Logger) (*Backend, error) {
	// client-go reports some stream errors through klog, on stderr, around our logger
	// (e.g. the attach's stdin copy when a finished sandbox's connection is closed); the
	// backend's own errors say what failed.
	klog.SetLogger(logr.Discard())
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "mcp-exec"
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("making a Kubernetes client: %w", err)
	}
	return &Backend{cfg: cfg, core: core, opts: opts.withDefaults(), log: log}, nil
}

// Namespace is where the sandbox pods are made.
func (b *Backend) Namespace() string { return b.opts.Namespace }

// classify wraps err: backend.ErrNotFound for a pod that is gone, backend.ErrEngineUnavailable
// when the API server did not answer with a status (connection refused, timeout, TLS).
func (b *Backend) classify(err error) error {
	if err == nil {
		return nil
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", backend.ErrNotFound, err)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) && !apierrors.IsServiceUnavailable(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: Kubernetes API server %s: %w", backend.ErrEngineUnavailable, b.cfg.Host, err)
}

// Ping checks that the API server answers.
func (b *Backend) Ping(ctx context.Context) error {
	_, err := b.core.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	return b.classify(err)
}

// ImageID returns the image reference itself: the API offers no image inspection to a
// namespaced Role, so a rebuilt image with the same tag is not noticed (use a new tag, or
// PullPolicy Always). A missing image shows when a pod starts (ErrImageMissing).
func (b *Backend) ImageID(ctx context.Context, image string) (string, error) {
	return image, nil
}

// Name identifies the cluster, e.g. "Kubernetes v1.34.4 at https://127.0.0.1:16443, namespace mcp-exec-sandbox".
func (b *Backend) Name(ctx context.Context) (string, error) {
	raw, err := b.core.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", b.classify(err)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("reading the API server's version: %w", err)
	}
	return fmt.Sprintf("Kubernetes %s at %s, namespace %s", v.GitVersion, b.cfg.Host, b.opts.Namespace), nil
}

// createTimeout bounds one create request.
const createTimeout = 30 * time.Second

// Create makes the pod. The pod starts as soon as it is scheduled: its bootstrap then waits
// for its code on stdin, which only Start's attach delivers.
func (b *Backend) Create(ctx context.Context, spec backend.Spec) (string, error) {
	if err := b.opts.validate(spec); err != nil {
		return "", err
	}
	// Not cancelled with ctx: the API server may create the pod after its client gave up,
	// and that pod, whose name the client never learnt, would be left behind (seen when a
	// server shut down while its pool refilled). It is quick; the caller honours ctx after.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	pod, err := b.core.Pods(b.opts.Namespace).Create(cctx, PodSpec(spec, b.opts), metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating pod in namespace %s: %w", b.opts.Namespace, b.classify(err))
	}
	if spec.EgressConns != nil {
		b.mu.Lock()
		if b.egress == nil {
			b.egress = map[string]podEgress{}
		}
		b.egress[pod.Name] = podEgress{spec.EgressConns, spec.EgressCABundle}
		b.mu.Unlock()
	}
	return pod.Name, nil
}

// takeEgress returns and forgets the egress channel pod was made with (zero: none).
func (b *Backend) takeEgress(pod string) podEgress {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.egress[pod]
	delete(b.egress, pod)
	return e
}

// Start waits for the pod's container to run, attaches to it, and opens its start gate, so
// that the bootstrap starts only once its output has somewhere to go.
func (b *Backend) Start(ctx context.Context, id string, stdout, stderr io.Writer) (backend.Conn, error) {
	if err := b.waitRunning(ctx, id); err != nil {
		return nil, err
	}
	// Open the start gate (see startGate) with the pod's seal key before anything else is
	// written: the bootstrap starts once the attach carries its output, and seals all of it.
	// A pod whose profile has inject rules gets its CA bundle through the gate too.
	eg := b.takeEgress(id)
	gate := wire.GateLine
	if eg.bundle != nil {
		gate = func(key string) string { return gateBundle(wire.GateLine(key), eg.bundle) }
	}
	c, err := b.attach(ctx, id, stdout, stderr, gate)
	if err != nil {
		return nil, err
	}
	if srv := eg.srv; srv != nil {
		// The pod's egress streams (egress.go), for as long as it is attached.
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		ac := c.(*conn)
		go func() {
			select {
			case <-ac.done:
			case <-ac.closed:
			}
			cancel()
		}()
		go b.runTunnels(tctx, id, srv)
	}
	return c, nil
}

// gateBundle is the gate's lines of a pod made with a CA bundle: the key's line, the
// bundle's length, the bundle (startGate).
func gateBundle(keyLine string, bundle []byte) string {
	return keyLine + strconv.Itoa(len(bundle)) + "\n" + string(bundle)
}

// Reattach (launcher.Reattacher) attaches again to a shared session's running pod, for
// one call: its first line, "MCPEXECR <key>", gives the bootstrap a fresh seal key whose
// keystream starts at 0, so that any replica can undo the seal of the call it serves
// without knowing what other replicas read. The pod's stdin outlives the attach
// (stdinOnce false); the bootstrap writes nothing between calls.
func (b *Backend) Reattach(ctx context.Context, id string, stdout, stderr io.Writer) (backend.Conn, error) {
	return b.attach(ctx, id, stdout, stderr, wire.ResealLine)
}

// attach attaches to the pod and writes, first, line(key): the line that carries a fresh
// seal key (hex) to the bootstrap.
func (b *Backend) attach(ctx context.Context, id string, stdout, stderr io.Writer, line func(key string) string) (backend.Conn, error) {
	req := b.core.RESTClient().Post().Namespace(b.opts.Namespace).Resource("pods").Name(id).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: containerName, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(b.cfg, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("attaching to pod %s: %w", id, err)
	}
	key, hexKey, err := newSealKey()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pr, pw := io.Pipe()
	c := &conn{pw: pw, cancel: cancel, done: make(chan struct{}), closed: make(chan struct{})}
	// The key's line goes first; the write returns when the stream reads it.
	c.mu.Lock()
	go func() {
		defer c.mu.Unlock()
		_, _ = pw.Write([]byte(line(hexKey)))
	}()
	unsealed := newUnsealer(stdout, key)
	go func() {
		defer close(c.done)
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: pr, Stdout: unsealed, Stderr: stderr})
		_ = pr.CloseWithError(io.ErrClosedPipe)
		if err != nil && sctx.Err() == nil {
			b.log.Debug().Err(err).Str("pod", id).Msg("attach stream ended with an error")
		}
	}()
	return c, nil
}

// conn is an attached pod's streams. Writes go through a pipe to the attach stream's stdin.
type conn struct {
	mu      sync.Mutex // held until the gate's newline is written
	pw      *io.PipeWriter
	cancel  context.CancelFunc
	done    chan struct{}
	closed  chan struct{} // closed by Close
	closeMu sync.Once
}

func (c *conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pw.Write(p)
}

// CloseWrite ends stdin: with stdinOnce, the program reads end of file.
func (c *conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pw.Close()
}

func (c *conn) Close() error {
	c.closeMu.Do(func() {
		close(c.closed)
		c.cancel()
		_ = c.pw.CloseWithError(io.ErrClosedPipe)
	})
	return nil
}

func (c *conn) Done() <-chan struct{} { return c.done }

// waitRunning watches the pod until its container runs, fails or cannot start: within
// StartTimeout, and within UnschedulableWait of the scheduler's finding no node for it
// unless a node autoscaler is adding one (startWait).
func (b *Backend) waitRunning(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	sw := newStartWait(b.opts.UnschedulableWait)
	defer sw.stop()
	pods := b.core.Pods(b.opts.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", id).String()
	for {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return b.startErr(ctx, id, sw, err)
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("starting pod %s: %w: it was deleted", id, backend.ErrNotFound)
		}
		if done, err := sw.see(&list.Items[0]); done {
			return err
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return b.startErr(ctx, id, sw, err)
		}
		done, err := b.watchStarted(ctx, w, sw)
		w.Stop()
		if done {
			return err
		}
		if ctx.Err() != nil {
			return b.startErr(ctx, id, sw, ctx.Err())
		}
		// The watch ended early (the API server closes watches now and then): list again.
	}
}

func (b *Backend) watchStarted(ctx context.Context, w watch.Interface, sw *startWait) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-sw.expired():
			if !b.scalingUp(ctx, sw) {
				return true, sw.unschedulableErr()
			}
			b.log.Info().Str("pod", sw.last.Name).Str("autoscaler", sw.scaling).Msg("an unschedulable pod waits for the node being added for it")
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return true, fmt.Errorf("starting pod: %w: it was deleted", backend.ErrNotFound)
			case watch.Added, watch.Modified:
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					if done, err := sw.see(pod); done {
						return true, err
					}
				}
			}
		}
	}
}

// scalingUp reads the events of the pod that has been unschedulable for the whole
// UnschedulableWait, and tells whether a node autoscaler is adding a node for it
// (startWait.scaleUp). Events it may not read (a Role without "list events") count as no
// autoscaler's.
func (b *Backend) scalingUp(ctx context.Context, sw *startWait) bool {
	sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": sw.last.Name}.AsSelector().String()
	list, err := b.core.Events(b.opts.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel, Limit: 100})
	if err != nil {
		b.log.Warn().Err(err).Str("pod", sw.last.Name).Msg("reading an unschedulable pod's events, to see whether a node is being added for it")
		return false
	}
	return sw.scaleUp(list.Items)
}

func (b *Backend) startErr(ctx context.Context, id string, sw *startWait, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("starting pod %s: not running after %s (%s): %w", id, b.opts.StartTimeout, sw.waitingFor(), err)
	}
	return fmt.Errorf("starting pod %s: %w", id, b.classify(err))
}

// imageReasons are the container waiting reasons that mean the image cannot be had.
var imageReasons = map[string]bool{
	"ErrImageNeverPull": true, "ErrImagePull": true, "ImagePullBackOff": true,
	"InvalidImageName": true, "ImageInspectError": true,
}

// podStarted reports whether the pod's container has started (nil) or will never run as a
// fresh sandbox (an error).
func podStarted(pod *corev1.Pod) (bool, error) {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return true, fmt.Errorf("pod %s ended before it was attached (%s: %s)", pod.Name, pod.Status.Reason, pod.Status.Message)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			return true, nil
		case cs.State.Terminated != nil:
			return true, fmt.Errorf("pod %s: its container ended before it was attached (exit code %d, %s)",
				pod.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
		case cs.State.Waiting != nil && imageReasons[cs.State.Waiting.Reason]:
			return true, fmt.Errorf("%w: pod %s: %s: %s", backend.ErrImageMissing, pod.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError",
			cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerError":
			return true, fmt.Errorf("pod %s: %s: %s", pod.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		}
	}
	return false, nil
}

// Kill deletes the pod at once (grace period 0): Kubernetes has no kill without delete, and
// the Role grants no exec. A pod already gone is not an error.
func (b *Backend) Kill(ctx context.Context, id string) error {
	err := b.Remove(ctx, id)
	if errors.Is(err, backend.ErrNotFound) {
		return nil
	}
	return err
}

// Inspect reports how the pod's container ended. A pod that is gone is backend.ErrNotFound
// (it was deleted from outside, or evicted and removed).
func (b *Backend) Inspect(ctx context.Context, id string) (backend.Exit, error) {
	pod, err := b.core.Pods(b.opts.Namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backend.Exit{}, fmt.Errorf("pod %s is gone (deleted from outside, or evicted and removed): %w", id, b.classify(err))
	}
	if err != nil {
		return backend.Exit{}, fmt.Errorf("reading pod %s: %w", id, b.classify(err))
	}
	return exitOf(pod), nil
}

// exitOf reads the container's end from the pod's status.
func exitOf(pod *corev1.Pod) backend.Exit {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return backend.Exit{Code: int(t.ExitCode), OOMKilled: t.Reason == "OOMKilled"}
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		// Evicted or past its deadline, with no container status recorded: killed.
		return backend.Exit{Code: 128 + 9}
	}
	return backend.Exit{Running: true}
}

// Remove deletes the pod with a grace period of 0: the API object goes at once and the
// kubelet kills its processes. It retries while the API server is away, until ctx ends.
func (b *Backend) Remove(ctx context.Context, id string) error {
	b.takeEgress(id) // made, never started
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err := b.classify(b.core.Pods(b.opts.Namespace).Delete(ctx, id, opts))
		if err == nil || !errors.Is(err, backend.ErrEngineUnavailable) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deleting pod %s: %w", id, err)
		case <-time.After(delay):
		}
	}
}

// List returns the names of every sandbox pod labelled with instance, in any phase.
func (b *Backend) List(ctx context.Context, instance string) ([]string, error) {
	sel := labels.SelectorFromSet(labels.Set{backend.LabelRole: backend.RoleSandbox, backend.LabelInstance: instance})
	// A shared session's pod belongs to every replica (backend.LabelSessionKey): "!key"
	// selects the pods without that label.
	list, err := b.core.Pods(b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String() + ",!" + backend.LabelSessionKey})
	if err != nil {
		return nil, fmt.Errorf("listing pods in namespace %s: %w", b.opts.Namespace, b.classify(err))
	}
	names := make([]string, 0, len(list.Items))
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names, nil
}

// LimitsHint says where a pod's limits come from, for the server's refusal to serve when one
// is not enforced (launcher.LimitsHinter).
func (b *Backend) LimitsHint() string {
	return "on Kubernetes, memory and CPU are the pod's limits; the pids limit is the kubelet's podPidsLimit " +
		"(KubeletConfiguration, per pod, on every node that runs sandboxes), which must be set and at most --pids"
}

// SettingSeccompProfile (Options.SeccompProfile) names the pods' Localhost profile.
const SettingSeccompProfile backend.Setting = "kube-seccomp-profile"

// SeccompHint (launcher.SeccompHinter) names the setting that gives the pods a profile
// of their own, which would deny io_uring where the bootstrap's filter did not.
func (b *Backend) SeccompHint() *backend.SettingError {
	return &backend.SettingError{Setting: SettingSeccompProfile, Text: func(v backend.Vars) string {
		return "on Kubernetes, name a Localhost profile that denies io_uring in " + v.Name(SettingSeccompProfile) + ": `mcp-exec seccomp-profile` prints one to install on the nodes (docs/kubernetes.md)"
	}}
}

// AwaitGone (launcher.GoneAwaiter) waits until no sandbox pod in the namespace holds a container or pod sandbox
// whose id is id (the selftest's daemon probe prints one from inside). Pods are deleted with
// a grace period of 0, so the API object goes at once; the kubelet kills the processes
// within a few seconds after (2 s of SIGTERM grace, which the bootstrap as PID 1 ignores).
func (b *Backend) AwaitGone(ctx context.Context, id string) error {
	sel := labels.SelectorFromSet(labels.Set{backend.LabelRole: backend.RoleSandbox}).String()
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		list, err := b.core.Pods(b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("listing pods: %w", b.classify(err))
		}
		holder := ""
		for _, p := range list.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if id != "" && strings.HasSuffix(cs.ContainerID, id) {
					holder = p.Name
				}
			}
		}
		switch {
		case holder == "":
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("pod %s still exists 45 s after its run ended", holder)
		}
	}
}
