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
	// SandboxPid returns the host pid of running container id's init process.
	SandboxPid(ctx context.Context, id string) (int, error)
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

// runOutside runs pr.Job, learns its sandbox's id from the SANDBOX-ID line it prints
// (through the progress reports), lets pr.Outside look at that sandbox, then ends the
// Job.
func runOutside(ctx context.Context, r Runner, e Engine, pr Probe) (launcher.Result, string, error) {
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ids := make(chan string, 1)
	job := pr.Job
	job.Progress = func(p launcher.Progress) {
		if id := SandboxID(p.Tail); id != "" {
			select {
			case ids <- id:
			default:
			}
		}
	}
	done := make(chan error, 1)
	var res launcher.Result
	go func() {
		var err error
		res, err = r.Run(jctx, job)
		if err == nil {
			err = pr.Check(res)
		}
		done <- err
	}()
	var evidence string
	var err error
	select {
	case id := <-ids:
		var pid int
		if pid, err = e.SandboxPid(ctx, id); err == nil {
			evidence, err = pr.Outside(ctx, Sandbox{ID: id, Pid: pid})
		} else if errors.Is(err, launcher.ErrNoHostPid) {
			err = fmt.Errorf("%w: %w", ErrNoHostView, err)
		}
		cancel()
		if jobErr := <-done; err == nil && jobErr != nil && !errors.Is(jobErr, context.Canceled) {
			err = fmt.Errorf("holding the sandbox: %w", jobErr)
		}
	case jobErr := <-done:
		err = fmt.Errorf("the program ended before it named its sandbox: %v", jobErr)
		if jobErr == nil {
			err = fmt.Errorf("the program ended before it named its sandbox (stdout %q)", res.Stdout)
		}
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		err = errors.New("the program named no sandbox within 30s")
	}
	return res, evidence, err
}
