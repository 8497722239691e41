package launcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// What the self-checks (launcher/probe) ask about this launcher's sandboxes.

// ErrNoHostPid: the backend cannot say which host process a sandbox is (it does not
// implement HostPider), so evidence from the engine's host cannot be taken.
var ErrNoHostPid = errors.New("the backend does not report a sandbox's host process")

// HostPider is implemented by backends whose sandboxes are processes on the engine's
// host (launcher/docker): HostPid returns the host pid of running sandbox id's init.
type HostPider interface {
	HostPid(ctx context.Context, id string) (int, error)
}

// SandboxPid returns the host pid of running sandbox id's init process, as the
// backend reports it, or an error wrapping ErrNoHostPid.
func (l *Launcher) SandboxPid(ctx context.Context, id string) (int, error) {
	hp, ok := l.be.(HostPider)
	if !ok {
		return 0, fmt.Errorf("sandbox %s: %w", shortID(id), ErrNoHostPid)
	}
	pid, err := hp.HostPid(ctx, id)
	if err != nil {
		return 0, l.backendErr(fmt.Sprintf("inspecting sandbox %s", shortID(id)), err)
	}
	return pid, nil
}

// GoneAwaiter is implemented by backends whose sandboxes know themselves by another id
// than the one List returns (a pod's container id is not the pod's name): AwaitGone
// waits until no sandbox holds id, or fails after its own bound.
type GoneAwaiter interface {
	AwaitGone(ctx context.Context, id string) error
}

// AwaitRemoved returns once the backend no longer lists sandbox id (the launcher
// removes a sandbox in the background once its result is in), or fails after 45 s.
// id is what the sandbox saw of itself from inside.
func (l *Launcher) AwaitRemoved(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("no sandbox id to await")
	}
	if ga, ok := l.be.(GoneAwaiter); ok {
		return ga.AwaitGone(ctx, id)
	}
	for deadline := time.Now().Add(45 * time.Second); ; {
		ids, err := l.listSandboxes(ctx)
		switch {
		case err != nil:
			return l.backendErr("listing sandboxes", err)
		case !slices.Contains(ids, id):
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("sandbox %s still exists 45s after its run ended", shortID(id))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
