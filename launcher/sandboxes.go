package launcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// What the self-checks (launcher/probe) ask of the engine about this launcher's
// sandboxes.

// SandboxPid returns the host pid of running sandbox id's init process, as the engine
// reports it.
func (l *Launcher) SandboxPid(ctx context.Context, id string) (int, error) {
	info, err := l.eng.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, l.engineErr(fmt.Sprintf("inspecting sandbox %s", shortID(id)), err)
	}
	if st := info.Container.State; st == nil || !st.Running || st.Pid == 0 {
		return 0, fmt.Errorf("sandbox %s is not running", shortID(id))
	}
	return info.Container.State.Pid, nil
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
