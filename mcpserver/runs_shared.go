package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Shared background runs: runs kept in a store every replica of the server shares
// (Kubernetes: launcher/kube.RunStore, in the annotations of their pods), whose calls
// run in sandboxes that keep their results (launcher's kept calls), so that any replica
// answers run_wait, run_cancel and the task methods for a run another started, and a
// replica's restart loses none. This server holds nothing of such a run between two
// requests: each look fetches it from its sandbox and builds the same *run the memory
// registry hands out, so that run_wait and the tasks answer both alike.

// RunStore keeps background runs outside this server's memory. Its errors
// backend.ErrRunNotFound and backend.ErrRunExpired are matched with errors.Is.
type RunStore interface {
	// Create returns the labels and annotations of the sandbox that starts handle's
	// run for owner, timeout its own: they are the record.
	Create(handle, owner string, timeout time.Duration) (labels, annotations map[string]string)
	// Get returns owner's run handle.
	Get(ctx context.Context, handle, owner string) (backend.RunRecord, error)
	// Ended records that r has ended (its TTL runs from the first time), and that it
	// was cancelled when canceled.
	Ended(ctx context.Context, r backend.RunRecord, canceled bool) (backend.RunRecord, error)
	// Forget removes owner's run handle without remembering it as expired.
	Forget(ctx context.Context, handle, owner string) error
	// Count is how many runs the store holds, all of them and owner's.
	Count(ctx context.Context, owner string) (all, owned int, err error)
}

// RunSandboxes starts and reads the sandboxes of a RunStore's runs (LauncherRuns).
type RunSandboxes interface {
	// Keep starts a sandbox with so's labels and annotations and job as its kept call.
	Keep(ctx context.Context, so launcher.SessionOptions, job launcher.Job) error
	// Fetch returns the run's progress while it runs, its result (done) once ended.
	Fetch(ctx context.Context, id string) (res launcher.Result, p launcher.Progress, done bool, err error)
	// Kill kills the run's call; its result stays.
	Kill(ctx context.Context, id string) error
}

// LauncherRuns keeps runs in a launcher's attached sandboxes (RunSandboxes).
type LauncherRuns struct{ L *launcher.Launcher }

func (l LauncherRuns) Keep(ctx context.Context, so launcher.SessionOptions, job launcher.Job) error {
	a, err := l.L.OpenAttached(ctx, so)
	if err != nil {
		return err
	}
	if err := a.Keep(ctx, job); err != nil {
		a.Close()
		return err
	}
	return nil
}

func (l LauncherRuns) Fetch(ctx context.Context, id string) (launcher.Result, launcher.Progress, bool, error) {
	return l.L.AttachSession(id).Fetch(ctx)
}

func (l LauncherRuns) Kill(ctx context.Context, id string) error {
	_, _, _, err := l.L.AttachSession(id).Kill(ctx)
	return err
}

// sharedPoll is how often a wait on a shared run looks at its sandbox.
const sharedPoll = 500 * time.Millisecond

func (r *runs) shared() bool { return r.o.Store != nil && r.o.Sandboxes != nil }

// startShared starts job as owner's run in a sandbox of its own, under the bounds
// counted over the store (every replica's runs).
func (r *runs) startShared(ctx context.Context, owner string, job launcher.Job) (*run, error) {
	all, owned, err := r.o.Store.Count(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("sandbox unavailable: counting background runs: %w", err)
	}
	if err := r.bounded(all, owned); err != nil {
		return nil, err
	}
	id := newHandle("run_")
	labels, ann := r.o.Store.Create(id, owner, job.Timeout)
	if err := r.o.Sandboxes.Keep(ctx, launcher.SessionOptions{Labels: labels, Annotations: ann}, job); err != nil {
		if errors.Is(err, launcher.ErrKeptTools) {
			return nil, &invalidInput{"background", err.Error() + "; call exec without background"}
		}
		r.log.Error().Err(backend.Spelled(err, r.vars)).Str("run", handleHash(id)).Msg("background run failed to start: sandbox unavailable")
		return nil, backend.Spelled(fmt.Errorf("sandbox unavailable: %w", err), r.vars)
	}
	r.log.Info().Str("run", handleHash(id)).Int64("timeout_ms", job.Timeout.Milliseconds()).Bool("shared", true).Msg("background run started")
	return &run{id: id, owner: owner, started: r.now(), timeout: job.Timeout, cancel: func() {}, done: make(chan struct{})}, nil
}

// storeErr is a store's error as run_wait and run_cancel answer it.
func (r *runs) storeErr(err error) error {
	switch {
	case errors.Is(err, backend.ErrRunNotFound):
		return errRunNotFound()
	case errors.Is(err, backend.ErrRunExpired):
		return r.errExpired()
	case errors.Is(err, backend.ErrRunLost):
		return errors.New("the run was lost: its sandbox ended (evicted, its node lost, or past the pod's deadline) before its result was fetched, so it has no result; run it again")
	}
	r.log.Error().Err(err).Msg("background run: store unavailable")
	return fmt.Errorf("sandbox unavailable: looking up the run: %w", err)
}

// getShared looks at owner's run id in its sandbox: a *run as the memory registry's,
// done (and with its result) once the run has ended.
func (r *runs) getShared(ctx context.Context, id, owner string) (*run, error) {
	rec, err := r.o.Store.Get(ctx, id, owner)
	if err != nil {
		return nil, r.storeErr(err)
	}
	ru := &run{id: id, owner: owner, started: rec.Started, timeout: rec.Timeout, cancel: func() {}, done: make(chan struct{})}
	res, p, done, err := r.o.Sandboxes.Fetch(ctx, rec.Sandbox)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.log.Error().Err(err).Str("run", handleHash(id)).Msg("background run: fetching from its sandbox")
		return nil, fmt.Errorf("sandbox unavailable: fetching the run from its sandbox: %w", err)
	}
	if !done {
		ru.progress.Store(&p)
		return ru, nil
	}
	if rec.Ended.IsZero() {
		if rec, err = r.o.Store.Ended(ctx, rec, false); err != nil {
			r.log.Warn().Err(err).Str("run", handleHash(id)).Msg("background run: recording its end")
		} else {
			r.log.Info().Str("run", handleHash(id)).Bool("result", true).Msg("background run ended")
		}
	}
	ru.ended = rec.Ended
	if ru.ended.IsZero() {
		ru.ended = r.now()
	}
	if rec.Canceled {
		ru.canceled.Store(true)
		ru.err = fmt.Errorf("the run was cancelled (%s), so it has no result", toolRunCancel)
	} else {
		var out any
		ru.res, out = r.result(res, rec.Timeout)
		ru.out, ru.err = asObject(out)
	}
	close(ru.done)
	return ru, nil
}

// waitShared looks at owner's run id until it has ended or d has passed.
func (r *runs) waitShared(ctx context.Context, id, owner string, d time.Duration) (*run, bool, error) {
	end := time.Now().Add(d)
	for {
		ru, err := r.getShared(ctx, id, owner)
		if err != nil {
			return nil, false, err
		}
		if closed(ru.done) {
			return ru, true, nil
		}
		left := time.Until(end)
		if left <= 0 {
			return ru, false, nil
		}
		select {
		case <-time.After(min(sharedPoll, left)):
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// cancelShared kills owner's run id: true when it was running.
func (r *runs) cancelShared(ctx context.Context, id, owner string) (bool, error) {
	ru, err := r.getShared(ctx, id, owner)
	if err != nil {
		return false, err
	}
	if closed(ru.done) {
		return false, nil
	}
	rec, err := r.o.Store.Get(ctx, id, owner)
	if err != nil {
		return false, r.storeErr(err)
	}
	if err := r.o.Sandboxes.Kill(ctx, rec.Sandbox); err != nil {
		return false, fmt.Errorf("sandbox unavailable: stopping the run: %w", err)
	}
	// The kill's end (the X frame) comes within the bootstrap's kill of the call.
	for end := time.Now().Add(15 * time.Second); ; {
		_, _, done, err := r.o.Sandboxes.Fetch(ctx, rec.Sandbox)
		if err != nil {
			return false, fmt.Errorf("sandbox unavailable: stopping the run: %w", err)
		}
		if done {
			break
		}
		if time.Now().After(end) {
			return false, errors.New("sandbox unavailable: the run did not end within 15s of its kill")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := r.o.Store.Ended(ctx, rec, true); err != nil {
		return false, fmt.Errorf("sandbox unavailable: recording the run's cancellation: %w", err)
	}
	r.log.Info().Str("run", handleHash(id)).Msg("background run cancelled")
	return true, nil
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sharedResult is exec's answer for res, a shared run's, as the foreground call would
// have given it.
func (h *handler) sharedResult(res launcher.Result, timeout time.Duration) (*mcp.CallToolResult, any) {
	files, infos, images := outputFiles(res.Files)
	out := newOutput(res, infos)
	text := &mcp.TextContent{Text: render(out, images, timeout, h.limits.MaxOutputBytes)}
	return &mcp.CallToolResult{Content: append([]mcp.Content{text}, files...)}, out
}
