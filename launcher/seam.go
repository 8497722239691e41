package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Backend makes and controls sandboxes: what differs between Docker or Podman
// containers (launcher/docker), Kubernetes pods and child processes. Everything else
// (the bootstrap and its frames, jobs and results, the output cap, files, the warm
// pool, slots, timeouts, limits verification, removal and reaping) is the Launcher's,
// the same for every backend. Its methods are called from many goroutines.
type Backend interface {
	// Ping checks that the backend's engine answers.
	Ping(ctx context.Context) error
	// ImageID returns an id of image that changes when the image is rebuilt (the
	// warm pool drains when it does; "" means the backend cannot tell), or an error
	// wrapping backend.ErrImageMissing.
	ImageID(ctx context.Context, image string) (string, error)
	// Name identifies the engine for the start-up log, e.g. "Docker Engine 20.10.24".
	Name(ctx context.Context) (string, error)

	// Create makes a sandbox from spec, applying every field of it, without starting
	// it, and returns its id.
	Create(ctx context.Context, spec backend.Spec) (id string, err error)
	// Start starts a created sandbox with its streams attached so that no output is
	// lost: its stdout and stderr are copied into the given writers until they end,
	// each writer written by one goroutine at a time (they are not safe for
	// concurrent use), and never after Conn.Done is closed. The copying outlives ctx,
	// which bounds only the start itself. On error nothing of the sandbox runs; the
	// launcher still removes it.
	Start(ctx context.Context, id string, stdout, stderr io.Writer) (backend.Conn, error)
	// Kill ends every process of the sandbox. One already stopped or gone is not an
	// error.
	Kill(ctx context.Context, id string) error
	// Inspect reports how the sandbox ended, after its streams did.
	Inspect(ctx context.Context, id string) (backend.Exit, error)
	// Remove kills and removes the sandbox and everything it holds; one already gone
	// is backend.ErrNotFound. It tries again, until ctx ends, while the engine is
	// busy or away.
	Remove(ctx context.Context, id string) error
	// List returns the ids of every sandbox, running or not, labelled with
	// instance (backend.LabelInstance): for reaping what an earlier run left (see
	// OwnerLister for servers that share an instance).
	List(ctx context.Context, instance string) ([]string, error)
}

// Check verifies that the engine answers and the image is present, with errors that
// tell the deployer what to do.
func (l *Launcher) Check(ctx context.Context) error {
	if err := l.be.Ping(ctx); err != nil {
		return l.backendErr("pinging engine", err)
	}
	if _, err := l.be.ImageID(ctx, l.opts.Image); err != nil {
		if errors.Is(err, ErrImageMissing) {
			return err
		}
		return l.backendErr("inspecting image", err)
	}
	return nil
}

// EngineName identifies the engine behind the launcher's backend.
func (l *Launcher) EngineName(ctx context.Context) (string, error) { return l.be.Name(ctx) }

// backendErr counts an engine failure and says what was being done.
func (l *Launcher) backendErr(doing string, err error) error {
	l.opts.Metrics.EngineError()
	return fmt.Errorf("%s: %w", doing, err)
}

// Reap removes the sandboxes that servers now gone left of this instance (after a
// crash or SIGKILL), found by label: without Options.Owner every sandbox of the
// instance; with it, those whose owner is proven gone (owners.go), never a live
// server's. Other instances' sandboxes are never touched.
func (l *Launcher) Reap(ctx context.Context) (int, error) {
	own, others, err := l.census(ctx, true)
	if err != nil {
		return 0, l.backendErr("listing leftover sandboxes", err)
	}
	var errs []error
	n := 0
	if l.opts.Owner.IsZero() {
		for _, id := range own {
			if err := l.remove(ctx, id); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	m, more := l.removeLeftovers(ctx, others)
	return n + m, errors.Join(append(errs, more...)...)
}

// Sandboxes lists the ids of this launcher's sandboxes that the engine still holds,
// running or not: none once Close has returned.
func (l *Launcher) Sandboxes(ctx context.Context) ([]string, error) {
	return l.listSandboxes(ctx)
}

// remove removes a sandbox; one already gone counts as removed.
func (l *Launcher) remove(ctx context.Context, id string) error {
	err := l.be.Remove(ctx, id)
	switch {
	case err == nil:
		l.opts.Metrics.ContainerRemoved()
		l.untrack(id)
		return nil
	case errors.Is(err, backend.ErrNotFound):
		l.untrack(id)
		return nil
	}
	return fmt.Errorf("removing container %s: %w", shortID(id), err)
}
