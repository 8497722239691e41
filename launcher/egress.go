package launcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// EgressChannels opens the per-sandbox channel of an egress profile (issue 23;
// launcher/egress/proxy.Server satisfies it). A job with Job.Egress set runs in a cold
// sandbox made for it, with its channel's directory bind-mounted at
// backend.EgressMount: the warm pool's sandboxes were made before any profile was
// known and never get one, so a sandbox without a profile has no way to the proxy.
type EgressChannels interface {
	// Open starts a channel bound to the named profile and returns the host directory
	// holding its socket and the function that ends it (its connections too).
	Open(ctx context.Context, profile string) (dir string, closeFn func() error, err error)
}

// EgressPort is the loopback port where the bootstrap of a sandbox with a profile
// relays connections to its channel's socket; the proxy variables point at it.
const EgressPort = 3128

// ErrEgressUnavailable: a job asked for an egress profile and the launcher has none.
var ErrEgressUnavailable = errors.New("egress profiles are not configured")

// ErrEgressGVisor: egress profiles are not supported under gVisor in this version.
var ErrEgressGVisor = errors.New("egress profiles are not supported under gVisor (runsc) yet")

// egressEnv is what a sandbox with a profile has on top of sandboxEnv: where the
// proxy is, for every HTTP library and pip. Fixed text, nothing of the job.
func egressEnv() []string {
	u := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	return []string{
		"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"PIP_PROXY=" + u,
	}
}

// egressSpec is SpecOf for a sandbox whose channel's directory is dir.
func egressSpec(o Options, dir string) backend.Spec {
	s := SpecOf(o)
	s.EgressDir = dir
	s.Env = append(slices.Clone(s.Env), egressEnv()...)
	return s
}

// startEgress opens a channel for profile and starts a cold sandbox holding it. The
// returned function closes the channel; call it once the sandbox is disposed of.
func (l *Launcher) startEgress(ctx context.Context, profile string) (*sandbox, func() error, error) {
	if l.opts.Egress == nil {
		return nil, nil, ErrEgressUnavailable
	}
	if l.opts.GVisor() {
		// runsc refuses connect() on a host socket unless started with --host-uds,
		// which this version neither sets nor checks: refuse rather than half-work.
		return nil, nil, ErrEgressGVisor
	}
	dir, closeCh, err := l.opts.Egress.Open(ctx, profile)
	if err != nil {
		return nil, nil, fmt.Errorf("opening egress channel: %w", err)
	}
	sb, err := l.startSpec(ctx, egressSpec(l.opts, dir), nil)
	if err != nil {
		closeCh()
		return nil, nil, err
	}
	return sb, closeCh, nil
}
