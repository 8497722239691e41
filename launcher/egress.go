package launcher

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// EgressChannels opens the per-sandbox channel of an egress profile
// (launcher/egress/proxy.Server satisfies it). A job with Job.Egress set runs in a cold
// sandbox made for it, with its channel's directory bind-mounted at
// backend.EgressMount: the warm pool's sandboxes were made before any profile was
// known and never get one, so a sandbox without a profile has no way to the proxy.
//
// A session with a profile (SessionOptions.Egress) has one channel per sandbox too: it
// is opened when the session's sandbox starts, its caps are reset as each call begins
// (they count per call), and it is closed with that sandbox (session_close, expiry, or
// a lost interpreter, whose restart opens a new one for the new sandbox).
type EgressChannels interface {
	// Open starts a channel bound to the named profile: with a socket in a directory
	// of its own (Dir, bind-mounted by the Docker/Podman backend), or, from a proxy
	// made without a socket directory, one whose connections the backend carries
	// (ServeEgress, the Kubernetes backend). label names the channel's sandbox in the
	// audit log (Job.Audit, SessionOptions.Audit).
	Open(ctx context.Context, profile string, label backend.AuditLabel) (backend.EgressChannel, error)
	// OpenCheck starts a channel that serves no profile and answers every connection
	// with token and a newline (CheckEgress), and returns it as Open does.
	OpenCheck(ctx context.Context) (ch backend.EgressChannel, token string, err error)
}

// EgressPort is the loopback port where the bootstrap of a sandbox with a profile
// relays connections to its channel's socket; the proxy variables point at it.
const EgressPort = 3128

// ErrEgressUnavailable: a job asked for an egress profile and the launcher has none.
var ErrEgressUnavailable = errors.New("egress profiles are not configured")

// ErrEgressChannel: the start-up check (CheckEgress) found that a sandbox cannot reach
// its channel, so no profile is served.
var ErrEgressChannel = errors.New("a sandbox cannot reach its egress channel")

// ErrEgressUnchecked: a job asked for a profile before CheckEgress passed.
var ErrEgressUnchecked = errors.New("egress channels are not checked (CheckEgress has not passed)")

// HostUDSFlag is the runsc flag without which gVisor refuses a sandbox's connect() to
// a host Unix socket mounted into it (ECONNREFUSED): the runtime that serves egress
// profiles must run with it (in dockerd's runtimes.<name>.runtimeArgs).
const HostUDSFlag = "--host-uds=open"

// egressCheckProgram connects to the channel's socket directly and through the
// bootstrap's relay, and prints what each answered: "unix ok <line>" or "unix err
// <exception>", then the same for "relay".
const egressCheckProgram = `
import socket
def ask(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(20)
    try:
        s.connect(addr)
        line = s.makefile("rb").readline().decode("ascii", "replace").strip()
        return "ok " + line if line else "err closed without an answer"
    except Exception as e:
        return "err %s: %s" % (type(e).__name__, e)
    finally:
        s.close()
import os
if os.path.exists("/egress/proxy.sock"):
    print("unix", ask(socket.AF_UNIX, "/egress/proxy.sock"))
else:
    print("unix none")
print("relay", ask(socket.AF_INET, ("127.0.0.1", 3128)))
`

// CheckEgress proves, before any profile is served, that a sandbox of this launcher
// can reach a channel: it opens a check channel, starts a sandbox as a job with a
// profile gets one (its directory bind-mounted at /egress, no network), and has it
// connect to the socket and to the relay; both must read the channel's random token.
// gVisor passes a host Unix socket through only with HostUDSFlag, and other runtimes
// or security modules (SELinux labels) may refuse it too; without this check such a
// profile would seem to work and every connection fail. Until it passes, jobs with a
// profile fail with ErrEgressUnchecked. It costs one cold sandbox; without Egress it
// does nothing.
func (l *Launcher) CheckEgress(ctx context.Context) error {
	if l.opts.Egress == nil {
		return nil
	}
	var token string
	wantUnix := "" // what the socket must answer: the token, or "none" without a socket
	job := Job{Code: egressCheckProgram, Timeout: 30 * time.Second, internal: true}
	res, err := l.call(ctx, job, func(ctx context.Context, job Job) (Result, error) {
		ch, tok, err := l.opts.Egress.OpenCheck(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("opening the egress check channel: %w", err)
		}
		token = tok
		defer ch.Close()
		if ch.Dir() == "" {
			wantUnix = "none" // the backend carries the connections: no socket to try
		}
		sb, err := l.startSpec(ctx, egressSpec(l.opts, ch), nil)
		if err != nil {
			return Result{}, err
		}
		defer l.dispose(sb)
		return sb.exec(ctx, job)
	})
	if err != nil {
		return fmt.Errorf("egress check: %w", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = v
		}
	}
	if wantUnix == "" {
		wantUnix = "ok " + token
	}
	if got["unix"] == wantUnix && got["relay"] == "ok "+token {
		l.egressOK.Store(true)
		return nil
	}
	what := fmt.Sprintf("socket: %s; relay 127.0.0.1:%d: %s", orNothing(got["unix"]), EgressPort, orNothing(got["relay"]))
	if res.ExitCode != 0 || got["unix"] == "" {
		what += fmt.Sprintf(" (exit %d, stderr %q)", res.ExitCode, truncate(res.Stderr, 300))
	}
	if l.opts.GVisor() && wantUnix == "none" {
		return fmt.Errorf("%w under gVisor (runtime %q): %s. On Kubernetes the backend reaches the sandbox's relay by a port-forward into the pod's network namespace, and gVisor's network stack is its own: run profiles under another RuntimeClass", ErrEgressChannel, l.opts.Runtime, what)
	}
	if l.opts.GVisor() {
		return fmt.Errorf("%w under gVisor (runtime %q): %s. runsc lets a sandbox connect to a host Unix socket mounted into it only when it runs with %s: register a runtime whose runtimeArgs include it (scripts/runsc.sh registers runsc-egress so)", ErrEgressChannel, l.opts.Runtime, what, HostUDSFlag)
	}
	return fmt.Errorf("%w (runtime %q): %s", ErrEgressChannel, orDefault(l.opts.Runtime), what)
}

func orNothing(s string) string {
	if s == "" {
		return "nothing printed"
	}
	return s
}

func orDefault(runtime string) string {
	if runtime == "" {
		return "the engine's default"
	}
	return runtime
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// egressEnv is what a sandbox with a profile has on top of sandboxEnv: where the
// proxy is, for every HTTP library and pip. Fixed text, nothing of the job.
func egressEnv() []string {
	u := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	return []string{
		"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"PIP_PROXY=" + u,
	}
}

// bundleEnv points every TLS stack a program may use at the CA bundle at p.
func bundleEnv(p string) []string {
	return []string{"SSL_CERT_FILE=" + p, "REQUESTS_CA_BUNDLE=" + p, "CURL_CA_BUNDLE=" + p, "PIP_CERT=" + p}
}

// egressSpec is SpecOf for a sandbox holding channel ch.
func egressSpec(o Options, ch backend.EgressChannel) backend.Spec {
	return withEgress(SpecOf(o), ch)
}

// withEgress is spec for a sandbox holding channel ch: its socket's directory mounted
// at backend.EgressMount, or, for a channel without a socket, the channel itself for
// the backend to serve the sandbox's connections (and backend.EgressTunnelEnv for its
// bootstrap); the proxy variables either way.
func withEgress(spec backend.Spec, ch backend.EgressChannel) backend.Spec {
	spec.Env = append(slices.Clone(spec.Env), egressEnv()...)
	b, ok := ch.(caBundler)
	bundle := ok && b.CABundle() != ""
	if bundle {
		// The profile has inject rules: the proxy terminates TLS for those hosts
		// with its own CA, which the sandbox trusts through this bundle (the system's
		// roots and that CA): read-only in the channel's directory, or written by the
		// backend that carries the channel.
		spec.Env = append(spec.Env, bundleEnv(path.Join(backend.EgressMount, b.CABundle()))...)
	}
	if spec.EgressDir = ch.Dir(); spec.EgressDir == "" {
		spec.EgressConns = ch
		spec.Env = append(spec.Env, backend.EgressTunnelEnv)
		if bundle {
			spec.EgressCABundle = b.CABundlePEM()
		}
	}
	return spec
}

// caBundler is a channel whose profile may have inject rules (proxy.Channel):
// CABundle names its sandbox's bundle in backend.EgressMount ("" without rules), and
// CABundlePEM is its content, for a backend that writes it there.
type caBundler interface {
	CABundle() string
	CABundlePEM() []byte
}

// egressChannel is a sandbox's open channel, or nil (a session without a profile).
type egressChannel struct{ backend.EgressChannel }

// end closes the channel, if there is one.
func (ch *egressChannel) end() {
	if ch != nil {
		ch.Close()
	}
}

// openEgress opens a channel for profile, labelled for the audit log, once CheckEgress
// has passed.
func (l *Launcher) openEgress(ctx context.Context, profile string, label backend.AuditLabel) (backend.EgressChannel, error) {
	if l.opts.Egress == nil {
		return nil, ErrEgressUnavailable
	}
	if !l.egressOK.Load() {
		// The runtime may not let the socket through (gVisor without HostUDSFlag):
		// refuse rather than half-work until CheckEgress has shown that it does.
		return nil, ErrEgressUnchecked
	}
	ch, err := l.opts.Egress.Open(ctx, profile, label)
	if err != nil {
		return nil, fmt.Errorf("opening egress channel: %w", err)
	}
	return ch, nil
}

// startEgress opens a channel for job's profile and starts a cold sandbox holding it.
// The returned function closes the channel; call it once the sandbox is disposed of.
func (l *Launcher) startEgress(ctx context.Context, job Job) (*sandbox, func() error, error) {
	ch, err := l.openEgress(ctx, job.Egress, job.Audit)
	if err != nil {
		return nil, nil, err
	}
	sb, err := l.startSpec(ctx, egressSpec(l.opts, ch), nil)
	if err != nil {
		ch.Close()
		return nil, nil, err
	}
	return sb, ch.Close, nil
}

// startSession starts the sandbox of a session: from spec, or, for a session with a
// profile, with a channel of its own opened first (never a pooled sandbox: the
// channel is given to the sandbox when it is made). ch is nil without a profile.
func (l *Launcher) startSession(ctx context.Context, spec backend.Spec, so SessionOptions, sw *switchWriter) (*sandbox, *egressChannel, error) {
	if so.Egress == "" {
		sb, err := l.startSpec(ctx, spec, sw)
		return sb, nil, err
	}
	ch, err := l.openEgress(ctx, so.Egress, so.Audit)
	if err != nil {
		return nil, nil, err
	}
	sb, err := l.startSpec(ctx, withEgress(spec, ch), sw)
	if err != nil {
		ch.Close()
		return nil, nil, err
	}
	// The launcher's Close removes a session's sandbox without its Session.Close:
	// the channel goes with the launcher then (a channel's close is idempotent).
	unhook := context.AfterFunc(l.stop, func() { ch.Close() })
	return sb, &egressChannel{hooked{ch, unhook}}, nil
}

// hooked is a channel whose Close also undoes the launcher's hook on it.
type hooked struct {
	backend.EgressChannel
	unhook func() bool
}

func (h hooked) Close() error { h.unhook(); return h.EgressChannel.Close() }
