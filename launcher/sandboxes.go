package launcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// What the self-checks (launcher/probe) ask of the engine about this launcher's
// sandboxes.

// RunningSandbox returns the newest running sandbox of this launcher and its init
// process's pid on the engine's host.
func (l *Launcher) RunningSandbox(ctx context.Context) (id string, pid int, err error) {
	f := make(client.Filters).Add("label", LabelInstance+"="+l.opts.Instance).Add("status", "running")
	list, err := l.eng.ContainerList(ctx, client.ContainerListOptions{Filters: f})
	if err != nil {
		return "", 0, l.engineErr("listing sandboxes", err)
	}
	items := list.Items
	slices.SortFunc(items, func(a, b container.Summary) int { return int(b.Created - a.Created) })
	for _, c := range items {
		info, err := l.eng.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil || info.Container.State == nil || !info.Container.State.Running || info.Container.State.Pid == 0 {
			continue
		}
		return c.ID, info.Container.State.Pid, nil
	}
	return "", 0, errors.New("no running sandbox")
}

// AwaitRemoved returns once the engine no longer knows container id (the launcher
// removes a sandbox in the background once its result is in), or after 45 s.
func (l *Launcher) AwaitRemoved(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("no container id to await")
	}
	for deadline := time.Now().Add(45 * time.Second); ; {
		_, err := l.eng.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err) || err != nil && strings.Contains(err.Error(), "no such container"):
			// Podman answers an inspect that races the removal with 500 "... does not
			// exist in database: no such container", then 404.
			return nil
		case err != nil:
			return fmt.Errorf("inspecting container %.12s: %w", id, err)
		case time.Now().After(deadline):
			return fmt.Errorf("container %.12s still exists 45s after its run ended", id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
