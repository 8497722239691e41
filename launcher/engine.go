package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Engine is the part of the Engine API client the launcher uses. *client.Client
// satisfies it, against Docker or Podman's Docker-compatible API.
type Engine interface {
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
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

// NewClient connects to the engine at host, or where DOCKER_HOST points when host is
// empty, negotiating the API version down to what the engine speaks. Addresses and
// the TLS variables (DOCKER_TLS_VERIFY, DOCKER_TLS, DOCKER_CERT_PATH) mean what they
// mean to the Docker CLI: unix://PATH; tcp://[HOST][:PORT] (localhost, port 2376 with
// TLS, 2375 without; with DOCKER_TLS_VERIFY only ca.pem is trusted); and
// ssh://[USER@]HOST[:PORT][/SOCKET], each connection a `ssh ... docker system
// dial-stdio` process. A tcp:// engine off this machine without verified TLS is
// refused (see NewClientWith). When neither names an engine and Docker's default
// socket (/var/run/docker.sock) does not exist, it uses Podman's socket:
// $XDG_RUNTIME_DIR/podman/podman.sock (rootless), then /run/podman/podman.sock
// (rootful), the first that exists. EngineName says which engine answered.
func NewClient(host string) (*client.Client, error) {
	return NewClientWith(host, ConnOptions{})
}

// Where engines listen by default on Linux.
const (
	dockerSocket       = "/var/run/docker.sock"    // client.DefaultDockerHost
	podmanRootfulSock  = "/run/podman/podman.sock" // podman system service, as root
	podmanRootlessSock = "podman/podman.sock"      // under $XDG_RUNTIME_DIR
)

// discovery finds the engine's address when none is configured. Its environment and
// file system are parameters so that tests can point it at temporary directories.
type discovery struct {
	getenv       func(string) string
	exists       func(path string) bool
	dockerSocket string
	podmanSocket string // the rootful one; the rootless one is under XDG_RUNTIME_DIR
}

func defaultDiscovery() discovery {
	return discovery{
		getenv: os.Getenv,
		exists: func(path string) bool {
			_, err := os.Stat(path)
			return err == nil
		},
		dockerSocket: dockerSocket,
		podmanSocket: podmanRootfulSock,
	}
}

// host returns the address to connect to, or "" to leave it to the client's own
// defaults (DOCKER_HOST, else Docker's socket).
func (d discovery) host(explicit string) string {
	switch {
	case explicit != "":
		return explicit
	case d.getenv(client.EnvOverrideHost) != "":
		return "" // client.FromEnv applies it
	case d.exists(d.dockerSocket):
		return "" // client.DefaultDockerHost
	}
	var candidates []string
	if xdg := d.getenv("XDG_RUNTIME_DIR"); xdg != "" {
		candidates = append(candidates, filepath.Join(xdg, podmanRootlessSock))
	}
	candidates = append(candidates, d.podmanSocket)
	for _, c := range candidates {
		if d.exists(c) {
			return "unix://" + c
		}
	}
	return "" // nothing found: errors will name Docker's default socket
}

// Engine products, as EngineInfo.Product names them.
const (
	ProductDocker = "Docker Engine"
	ProductPodman = "Podman Engine"
)

// EngineInfo identifies the engine behind a client.
type EngineInfo struct {
	Product    string // ProductDocker, ProductPodman, or the name the engine gives itself
	Version    string // the product's version (for Podman, Podman's, not the API's)
	APIVersion string // the Docker API version the engine speaks
	Platform   string // the engine's platform name, when it gives one
}

func (e EngineInfo) String() string {
	s := e.Product
	if e.Version != "" {
		s += " " + e.Version
	}
	if e.APIVersion != "" {
		s += " (API " + e.APIVersion + ")"
	}
	return s
}

// IsPodman reports whether the engine is Podman's Docker-compatible service.
func (e EngineInfo) IsPodman() bool { return e.Product == ProductPodman }

// versioner is the part of the client IdentifyEngine needs.
type versioner interface {
	ServerVersion(ctx context.Context, options client.ServerVersionOptions) (client.ServerVersionResult, error)
}

// IdentifyEngine asks the engine which product and version it is, from its version
// report: Podman lists a "Podman Engine" component, Docker an "Engine" component (and
// a platform name such as "Docker Engine - Community" in official builds).
func IdentifyEngine(ctx context.Context, eng versioner) (EngineInfo, error) {
	v, err := eng.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return EngineInfo{}, fmt.Errorf("asking the engine for its version: %w", err)
	}
	return identify(v), nil
}

func identify(v client.ServerVersionResult) EngineInfo {
	info := EngineInfo{Version: v.Version, APIVersion: v.APIVersion, Platform: v.Platform.Name}
	for _, c := range v.Components {
		switch {
		case strings.EqualFold(c.Name, ProductPodman) || strings.HasPrefix(strings.ToLower(c.Name), "podman"):
			info.Product = ProductPodman
		case c.Name == "Engine":
			info.Product = ProductDocker
		default:
			continue
		}
		if c.Version != "" {
			info.Version = c.Version
		}
		return info
	}
	switch p := v.Platform.Name; {
	case strings.Contains(strings.ToLower(p), "podman"):
		info.Product = ProductPodman
	case strings.Contains(strings.ToLower(p), "docker"):
		info.Product = ProductDocker
	case p != "":
		info.Product = p
	default:
		info.Product = "unknown engine"
	}
	return info
}

// EngineName is IdentifyEngine as one line, e.g. "Podman Engine 4.3.1 (API 1.41)" or
// "Docker Engine 20.10.24+dfsg1 (API 1.41)", for the server's start-up log.
func EngineName(ctx context.Context, eng versioner) (string, error) {
	info, err := IdentifyEngine(ctx, eng)
	if err != nil {
		return "", err
	}
	return info.String(), nil
}

// Check verifies that the engine answers and the image is present, with errors that
// tell the deployer what to do.
func (l *Launcher) Check(ctx context.Context) error {
	if _, err := l.eng.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return l.engineErr("pinging engine", err)
	}
	if _, err := l.eng.ImageInspect(ctx, l.opts.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("%w: %q is not in the engine at %s; build it with scripts/images.sh (or `make image`)",
				ErrImageMissing, l.opts.Image, l.eng.DaemonHost())
		}
		return l.engineErr("inspecting image", err)
	}
	return nil
}

// engineErr classifies an engine error. Connection failures become
// ErrEngineUnavailable naming the address tried.
func (l *Launcher) engineErr(doing string, err error) error {
	l.opts.Metrics.EngineError()
	if unreachable(err) || errors.Is(err, context.DeadlineExceeded) && !isCtxErr(err) {
		return fmt.Errorf("%s: %w at %s (is the engine running? set DOCKER_HOST or --engine-host): %w",
			doing, ErrEngineUnavailable, l.eng.DaemonHost(), err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// unreachable reports an error of the connection to the engine, however the client
// wrapped it (requests and hijacked attaches report it differently).
func unreachable(err error) bool {
	var op *net.OpError
	return client.IsErrConnectionFailed(err) || errors.As(err, &op) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNRESET)
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled)
}

// Reap removes the containers a previous run of this instance left behind (after a
// crash or SIGKILL), found by label; other instances' containers are never touched.
func (l *Launcher) Reap(ctx context.Context) (int, error) {
	f := make(client.Filters).
		Add("label", LabelRole+"=sandbox").
		Add("label", LabelInstance+"="+l.opts.Instance)
	list, err := l.eng.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, l.engineErr("listing leftover sandboxes", err)
	}
	var errs []error
	n := 0
	for _, c := range list.Items {
		if c.Labels[LabelInstance] != l.opts.Instance {
			continue // filters are the engine's business; check anyway
		}
		if err := l.remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func (l *Launcher) remove(ctx context.Context, id string) error {
	// A conflict means the engine is busy with the container (still starting after a
	// cancelled start, or already being removed): try again until it is gone.
	for {
		_, err := l.eng.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		// An unreachable engine is retried too, until ctx ends: a restarted engine
		// still holds the container, stopped.
		switch {
		case err == nil:
			l.opts.Metrics.ContainerRemoved()
			return nil
		case cerrdefs.IsNotFound(err):
			return nil
		case !cerrdefs.IsConflict(err) && !unreachable(err) && !podmanRemoveRace(err):
			return fmt.Errorf("removing container %s: %w", shortID(id), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing container %s: %w", shortID(id), errors.Join(err, ctx.Err()))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// podmanRemoveRace: Podman 4.x answers a forced remove that races the container's own
// exit with HTTP 500 "container state improper" (it tried to SIGKILL a container
// that had just stopped). Trying again removes it.
func podmanRemoveRace(err error) bool {
	return strings.Contains(err.Error(), "container state improper")
}
