package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
)

// sandboxBackend is the configured backend (--backend) and what the commands need of it
// beyond launcher.Backend.
type sandboxBackend struct {
	launcher.Backend
	host  string // where it is, for the start-up log
	close func()
}

// openBackend connects to the configured backend without contacting it.
func openBackend(cfg config.Config, log zerolog.Logger) (*sandboxBackend, error) {
	if cfg.Backend == "kubernetes" {
		return openKube(cfg, log)
	}
	cli, err := engineClient(cfg, log)
	if err != nil {
		return nil, err
	}
	be, err := docker.New(cli, log)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &sandboxBackend{
		Backend: be,
		host:    cli.DaemonHost(),
		close:   func() { cli.Close() },
	}, nil
}

// openKube makes the Kubernetes backend: in a pod with its ServiceAccount, else from a
// kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and --kube-context.
func openKube(cfg config.Config, log zerolog.Logger) (*sandboxBackend, error) {
	rc, podNS, err := kube.ClientConfig(cfg.Kubeconfig, cfg.KubeContext)
	if err != nil {
		return nil, fmt.Errorf("connecting to Kubernetes: %w", err)
	}
	ns := cfg.KubeNamespace
	if err := kube.CheckNamespace(ns, podNS); err != nil {
		return nil, fmt.Errorf("--kube-namespace (MCP_EXEC_KUBE_NAMESPACE): %w", err)
	}
	// Validate has parsed these already.
	sel, _ := kube.ParseLabels(cfg.KubeNodeSelector)
	labels, _ := kube.ParseLabels(cfg.KubePodLabels)
	tol, _ := kube.ParseTolerations(cfg.KubeTolerations)
	be, err := kube.New(rc, kube.Options{
		Namespace:      ns,
		UserNamespace:  cfg.KubeUserNamespace,
		PullPolicy:     corev1.PullPolicy(cfg.KubePullPolicy),
		NodeSelector:   sel,
		Tolerations:    tol,
		Labels:         labels,
		SeccompProfile: cfg.KubeSeccompProfile,
		// The backstop must outlast a warm pod's wait in the pool and its longest exec,
		// and a session pod's maximum lifetime with a call that began at its end.
		ActiveDeadline:    activeDeadline(cfg),
		UnschedulableWait: unschedulableWait(cfg.KubeUnschedulable),
	}, log)
	if err != nil {
		return nil, err
	}
	return &sandboxBackend{
		Backend: be,
		host:    rc.Host + " namespace " + ns,
		close:   func() {},
	}, nil
}

// unschedulableWait is --kube-unschedulable-wait-s as kube.Options takes it: there 0 is
// the default, and no bound of its own is negative.
func unschedulableWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// ociSeccompProfile is the sandboxes' seccomp profile (launcher/docker's) resolved for a
// process without capabilities, in the OCI form that containerd and CRI-O load as a
// Kubernetes Localhost profile. Loaded as is, the Docker form would be wrong there: those
// runtimes ignore its conditions on capabilities, so every conditional rule would allow
// (unshare(CLONE_NEWUSER), setns, bpf, ... measured on containerd 1.6).
func ociSeccompProfile(gvisor bool) (string, error) {
	profile := docker.SeccompProfile
	if gvisor {
		profile = docker.GVisorSeccompProfile
	}
	p, err := profile()
	if err != nil {
		return "", err
	}
	rs := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	sc, err := seccomp.LoadProfile(p, rs)
	if err != nil {
		return "", fmt.Errorf("resolving the seccomp profile: %w", err)
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// activeDeadline is the sandbox pods' activeDeadlineSeconds: an hour more than the
// longest exec, and with sessions on, more than a session's maximum lifetime and the
// longest exec together (a session pod lives that long).
func activeDeadline(cfg config.Config) time.Duration {
	d := cfg.MaxTimeout + time.Hour
	if cfg.MaxSessions > 0 {
		d = max(d, cfg.SessionMaxLifetime+cfg.MaxTimeout+time.Minute)
	}
	return d
}
