package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

// Client is the part of the Engine API client a Backend uses. *client.Client satisfies
// it, against Docker or Podman's Docker-compatible API.
type Client interface {
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
	ServerVersion(ctx context.Context, options client.ServerVersionOptions) (client.ServerVersionResult, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerAttach(ctx context.Context, id string, options client.ContainerAttachOptions) (client.ContainerAttachResult, error)
	ContainerStart(ctx context.Context, id string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerKill(ctx context.Context, id string, options client.ContainerKillOptions) (client.ContainerKillResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerRemove(ctx context.Context, id string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	DaemonHost() string
}

// Backend runs sandboxes as containers of a Docker or Podman engine. It satisfies
// launcher.Backend.
type Backend struct {
	cli Client
	log zerolog.Logger

	secMu  sync.Mutex
	podman bool      // the engine is Podman (found by seccompOption)
	secOpt [2]string // the value after "seccomp=" (the profile, or for Podman a path to it), [1] under gVisor
}

// New returns a Backend that talks to cli. It does not contact the engine.
func New(cli Client, log zerolog.Logger) (*Backend, error) {
	if _, err := seccompJSON(); err != nil {
		return nil, err
	}
	return &Backend{cli: cli, log: log}, nil
}

// Ping checks that the engine answers.
func (b *Backend) Ping(ctx context.Context) error {
	_, err := b.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return b.classify(err)
}

// ImageID returns the id of image, or an error wrapping backend.ErrImageMissing.
func (b *Backend) ImageID(ctx context.Context, image string) (string, error) {
	img, err := b.cli.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("%w: %q is not in the engine at %s; build it with scripts/images.sh (or `make image`)",
			backend.ErrImageMissing, image, b.cli.DaemonHost())
	}
	if err != nil {
		return "", b.classify(err)
	}
	return img.ID, nil
}

// Name identifies the engine, e.g. "Docker Engine 20.10.24+dfsg1 (API 1.41)".
func (b *Backend) Name(ctx context.Context) (string, error) {
	return engine.Name(ctx, b.cli)
}

const createTimeout = 30 * time.Second

// Create creates the container of spec, hardened by ContainerSpec, without starting it.
func (b *Backend) Create(ctx context.Context, spec backend.Spec) (string, error) {
	if spec.EgressConns != nil {
		return "", errors.New("an egress channel without a socket (Spec.EgressConns) is for the Kubernetes backend: on Docker and Podman the server's egress proxy needs a socket directory, bind-mounted into the sandbox")
	}
	profile, err := b.seccompOption(ctx, spec.Runtime)
	if err != nil {
		return "", err
	}
	cfg, host := ContainerSpec(spec, profile)
	if b.isPodman() {
		host.Ulimits = withoutCore(host.Ulimits)
	}
	// The create is not cancelled with ctx: an engine may finish creating a container
	// after its client gave up, and that container would leak. It is quick; the
	// caller honours the cancellation right after.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	created, err := b.cli.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("%w: %q (build it with scripts/images.sh): %w", backend.ErrImageMissing, spec.Image, err)
	}
	if err != nil {
		return "", b.classify(err)
	}
	return created.ID, nil
}

// Start attaches to the container's streams and then starts it: output written
// before an attach is lost, as there is no log driver to replay it.
func (b *Backend) Start(ctx context.Context, id string, stdout, stderr io.Writer) (backend.Conn, error) {
	att, err := b.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{
		Stream: true, Stdin: true, Stdout: true, Stderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("attaching to sandbox %.12s: %w", id, b.classify(err))
	}
	c := &conn{HijackedResponse: att.HijackedResponse, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		// Always demultiplex: the API may not announce the stream's content type.
		// Read through the hijacked Reader, which may already hold buffered bytes.
		_, _ = stdcopy.StdCopy(stdout, stderr, c.Reader)
	}()
	if _, err := b.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		c.Close()
		return nil, fmt.Errorf("starting sandbox %.12s: %w", id, b.classify(err))
	}
	return c, nil
}

// conn is an attached container's hijacked connection.
type conn struct {
	client.HijackedResponse
	done chan struct{}
}

func (c *conn) Write(p []byte) (int, error) { return c.Conn.Write(p) }
func (c *conn) Close() error                { c.HijackedResponse.Close(); return nil }
func (c *conn) Done() <-chan struct{}       { return c.done }

// Kill sends SIGKILL to the container, which ends every process in it. A container
// already stopped or gone is not an error.
func (b *Backend) Kill(ctx context.Context, id string) error {
	_, err := b.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	if IsGone(err) || cerrdefs.IsConflict(err) {
		return nil
	}
	return err
}

// Inspect reads the container's state as the engine recorded it.
func (b *Backend) Inspect(ctx context.Context, id string) (backend.Exit, error) {
	info, err := b.inspect(ctx, id)
	if IsGone(err) {
		return backend.Exit{}, fmt.Errorf("%w: %w", backend.ErrNotFound, err)
	}
	if err != nil {
		return backend.Exit{}, b.classify(err)
	}
	state := info.Container.State
	if state == nil {
		return backend.Exit{Running: true}, nil
	}
	return backend.Exit{Running: state.Running, Code: state.ExitCode, OOMKilled: state.OOMKilled}, nil
}

// inspect is ContainerInspect, asked again through Podman's /proc race.
func (b *Backend) inspect(ctx context.Context, id string) (client.ContainerInspectResult, error) {
	return RetryProcRace(ctx, func() (client.ContainerInspectResult, error) {
		return b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	})
}

// HostPid returns the host pid of the running container's init process (for the
// outside evidence of launcher/probe; launcher.HostPider).
func (b *Backend) HostPid(ctx context.Context, id string) (int, error) {
	info, err := b.inspect(ctx, id)
	if IsGone(err) {
		return 0, fmt.Errorf("%w: %w", backend.ErrNotFound, err)
	}
	if err != nil {
		return 0, b.classify(err)
	}
	if st := info.Container.State; st == nil || !st.Running || st.Pid == 0 {
		return 0, fmt.Errorf("container %.12s is not running", id)
	}
	return info.Container.State.Pid, nil
}

// Remove force-removes the container, trying again until ctx ends while the engine is
// busy with it or away (a restarted engine still holds the container, stopped). A
// container already gone is backend.ErrNotFound.
func (b *Backend) Remove(ctx context.Context, id string) error {
	for {
		_, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			return nil
		case IsGone(err):
			return fmt.Errorf("%w: %w", backend.ErrNotFound, err)
		// A conflict means the engine is busy with the container (still starting
		// after a cancelled start, or already being removed).
		case !cerrdefs.IsConflict(err) && !unreachable(err) && !podmanRemoveRace(err):
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// List returns the ids of every container, running or not, labelled as a sandbox of
// instance.
func (b *Backend) List(ctx context.Context, instance string) ([]string, error) {
	items, err := b.list(ctx, instance)
	var ids []string
	for _, c := range items {
		ids = append(ids, c.ID)
	}
	return ids, err
}

// ListOwners (launcher.OwnerLister) is List with each sandbox's owner and state. A
// sandbox not running is inspected for when it ended.
func (b *Backend) ListOwners(ctx context.Context, instance string) ([]backend.Listed, error) {
	items, err := b.list(ctx, instance)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Listed, 0, len(items))
	for _, c := range items {
		l := backend.Listed{ID: c.ID, Owner: c.Labels[backend.LabelOwner], OwnerContainer: c.Labels[backend.LabelOwnerContainer],
			Created: time.Unix(c.Created, 0), Running: true}
		switch c.State {
		case container.StateCreated:
			l.Running, l.Ended = false, time.Unix(c.Created, 0)
		case container.StateExited, container.StateDead:
			l.Running = false
			if info, err := b.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{}); err == nil && info.Container.State != nil {
				l.Ended, _ = time.Parse(time.RFC3339Nano, info.Container.State.FinishedAt)
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// ContainerStarted (launcher.ContainerStarter) says whether container id runs and
// when it last started; one the engine does not hold is backend.ErrNotFound.
func (b *Backend) ContainerStarted(ctx context.Context, id string) (time.Time, bool, error) {
	info, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case IsGone(err):
		return time.Time{}, false, fmt.Errorf("%w: %w", backend.ErrNotFound, err)
	case err != nil:
		return time.Time{}, false, b.classify(err)
	case info.Container.State == nil:
		return time.Time{}, false, fmt.Errorf("container %.12s: no state", id)
	}
	started, err := time.Parse(time.RFC3339Nano, info.Container.State.StartedAt)
	return started, info.Container.State.Running, err
}

func (b *Backend) list(ctx context.Context, instance string) ([]container.Summary, error) {
	f := make(client.Filters).
		Add("label", backend.LabelRole+"="+backend.RoleSandbox).
		Add("label", backend.LabelInstance+"="+instance)
	list, err := RetryProcRace(ctx, func() (client.ContainerListResult, error) {
		return b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	})
	if err != nil {
		return nil, b.classify(err)
	}
	var items []container.Summary
	for _, c := range list.Items {
		if c.Labels[backend.LabelInstance] == instance { // filters are the engine's business; check anyway
			items = append(items, c)
		}
	}
	return items, nil
}

// classify marks a failure to reach the engine as backend.ErrEngineUnavailable,
// naming the address tried.
func (b *Backend) classify(err error) error {
	if err == nil {
		return nil
	}
	if unreachable(err) || errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w at %s (is the engine running? set DOCKER_HOST or --engine-host): %w",
			backend.ErrEngineUnavailable, b.cli.DaemonHost(), err)
	}
	return err
}

// unreachable reports an error of the connection to the engine, however the client
// wrapped it (requests and hijacked attaches report it differently).
func unreachable(err error) bool {
	var op *net.OpError
	return client.IsErrConnectionFailed(err) || errors.As(err, &op) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNRESET)
}

// IsGone reports whether err says the container does not exist: a 404, or Podman's
// 500 "... does not exist in database: no such container", which it answers to a
// request that races the container's removal.
func IsGone(err error) bool {
	return err != nil && (cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "no such container"))
}

// podmanRemoveRace: Podman 4.x answers a forced remove that races the container's own
// exit with HTTP 500 "container state improper" (it tried to SIGKILL a container
// that had just stopped). Trying again removes it.
func podmanRemoveRace(err error) bool {
	return strings.Contains(err.Error(), "container state improper")
}

// podmanProcRace: Podman before 4.4 answers a request that reads a container's
// cgroup from /proc/PID/cgroup (a list, an inspect) with HTTP 500 "read
// /proc/N/cgroup: no such process" when the container's process exits between the
// open and the read (Podman issue 16383, fixed in 4.4; Debian 12 ships 4.3.1). The
// container is then stopped, and asking again gets an answer.
func podmanProcRace(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "/proc/") && strings.Contains(msg, "no such process")
}

// procRaceTries bounds RetryProcRace: the race is one exit's window, so a few tries
// apart see the container stopped; an error that stays is returned.
const procRaceTries = 5

// RetryProcRace calls do until it returns anything but Podman's /proc race, at most
// procRaceTries times, 20 ms apart at first and longer after, within ctx, and returns
// its last answer. The launcher's tests that list containers themselves use it too.
func RetryProcRace[T any](ctx context.Context, do func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := do()
		if err == nil || i == procRaceTries || !podmanProcRace(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(i) * 20 * time.Millisecond):
		}
	}
}

// isPodman reports whether seccompOption found the engine to be Podman.
func (b *Backend) isPodman() bool {
	b.secMu.Lock()
	defer b.secMu.Unlock()
	return b.podman
}

// withoutCore drops the core ulimit for Podman. Its compatible API replaces the
// default ulimits of containers.conf (default_ulimits) with the request's, so a
// request with only core 0:0 gets nofile and nproc raised to the service's own, which
// fails where no process has CAP_SYS_RESOURCE (measured: runc "error setting rlimit
// type 7: operation not permitted", seen as a 409 on attach). Under Podman the layer
// is the bootstrap's RLIMIT_CORE (0, 0), set in PID 1 before the program is forked, so
// that no process of the program can raise it; the probe core_dumps_disabled checks it.
func withoutCore(us []*container.Ulimit) []*container.Ulimit {
	var out []*container.Ulimit
	for _, u := range us {
		if u.Name != "core" {
			out = append(out, u)
		}
	}
	return out
}
