package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// Runner runs one job in a fresh sandbox: *launcher.Launcher.
type Runner interface {
	Run(ctx context.Context, job launcher.Job) (launcher.Result, error)
}

// Engine is what a probe run asks of the engine about the runner's sandboxes:
// *launcher.Launcher.
type Engine interface {
	// RunningSandbox returns a running sandbox of the runner and its init process's
	// pid on the engine's host.
	RunningSandbox(ctx context.Context) (id string, pid int, err error)
	// AwaitRemoved returns once the engine no longer knows container id.
	AwaitRemoved(ctx context.Context, id string) error
}

// Run runs pr against r: its Job in a fresh sandbox and its Check on the result,
// its Outside evidence while the Job holds a sandbox, then (when all passed) its Next,
// after the first container is gone if pr.AwaitRemoval. It returns the last Result,
// the outside evidence, and the first failure. An error wrapping ErrNoHostView means
// the outside evidence could not be taken: report it as not checked, never as passed.
func Run(ctx context.Context, r Runner, e Engine, pr Probe) (launcher.Result, string, error) {
	if pr.Outside != nil {
		return runOutside(ctx, r, e, pr)
	}
	res, err := r.Run(ctx, pr.Job)
	if err != nil {
		return res, "", fmt.Errorf("running: %w", err)
	}
	if err := pr.Check(res); err != nil {
		return res, "", err
	}
	if pr.Next == nil {
		return res, "", nil
	}
	if pr.AwaitRemoval {
		id := SandboxID(res.Stdout)
		if id == "" {
			return res, "", errors.New("the program printed no SANDBOX-ID line: cannot confirm its container is removed")
		}
		if err := e.AwaitRemoved(ctx, id); err != nil {
			return res, "", err
		}
	}
	return Run(ctx, r, e, *pr.Next)
}

// runOutside holds a sandbox with pr.Job while pr.Outside looks at one from outside,
// then ends the Job.
func runOutside(ctx context.Context, r Runner, e Engine, pr Probe) (launcher.Result, string, error) {
	jctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var res launcher.Result
	go func() {
		var err error
		res, err = r.Run(jctx, pr.Job)
		if err == nil {
			err = pr.Check(res)
		}
		done <- err
	}()
	evidence, err := pr.Outside(ctx, e)
	cancel()
	jobErr := <-done
	if err != nil {
		return res, evidence, err
	}
	if jobErr != nil && !errors.Is(jobErr, context.Canceled) {
		return res, evidence, fmt.Errorf("holding a sandbox: %w", jobErr)
	}
	return res, evidence, nil
}

// hostEvidence is the Outside of the host_view probe: HostEvidence on a running
// sandbox, tried again for a while when the sandbox it found ended meanwhile.
func hostEvidence(p Params, h Host) func(ctx context.Context, e Engine) (string, error) {
	return func(ctx context.Context, e Engine) (string, error) {
		var last error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			id, pid, err := e.RunningSandbox(ctx)
			if err == nil {
				var ev string
				ev, err = HostEvidence(h, p, Sandbox{ID: id, Pid: pid})
				if err == nil || !errors.Is(err, ErrNoHostView) {
					return ev, err
				}
			}
			last = err
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
		return "", last
	}
}
