package launcher

import (
	"context"
	"errors"
	"fmt"
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

// NewClient connects to the engine at host, or where DOCKER_HOST (and
// DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) point when host is empty, negotiating the API
// version down to what the engine speaks.
func NewClient(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating engine client: %w", err)
	}
	return cli, nil
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
	if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) && !isCtxErr(err) {
		return fmt.Errorf("%s: %w at %s (is the engine running? set DOCKER_HOST or --engine-host): %w",
			doing, ErrEngineUnavailable, l.eng.DaemonHost(), err)
	}
	return fmt.Errorf("%s: %w", doing, err)
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
		switch {
		case err == nil || cerrdefs.IsNotFound(err):
			return nil
		case !cerrdefs.IsConflict(err):
			return fmt.Errorf("removing container %s: %w", shortID(id), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing container %s: %w", shortID(id), errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
