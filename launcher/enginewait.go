package launcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Engine restarts. A call that finds the engine away (a create refused, a sandbox
// whose engine vanished under it) waits for the engine to answer again, for at most
// Options.EngineWait and at most the call's own timeout, and then runs from the start
// in a new sandbox: the sandbox has no network and nothing persists, so a program cut
// off by the engine's restart has had no effect outside it, and its output is dropped.
// The wait is not run time: the new sandbox gets the whole timeout. Only past the
// bound does the call fail, with the engine's error and how long it waited.

// engineWaitPoll is how often a waiting call (or the pool) asks whether the engine is
// back: a ping costs the engine next to nothing.
const engineWaitPoll = 250 * time.Millisecond

// runWaiting runs attempt, and again after waiting for the engine each time it fails
// because the engine went away, within the bound. It returns the time spent waiting.
func (l *Launcher) runWaiting(ctx context.Context, job Job, attempt func() (Result, error)) (Result, time.Duration, error) {
	bound := min(l.opts.EngineWait, job.Timeout)
	var waited time.Duration
	for {
		res, err := attempt()
		if err == nil || bound <= 0 || ctx.Err() != nil || l.stop.Err() != nil || !l.engineAway(ctx, err) {
			return res, waited, err
		}
		left := bound - waited
		if left <= 0 {
			return res, waited, engineWaitError(err, func(v backend.Vars) string {
				return fmt.Sprintf("%v (waited %s for the engine to come back, the limit: %s, or the call's timeout)",
					err, waited.Round(time.Millisecond), v.Name(SettingEngineWait))
			})
		}
		l.log.Info().Err(err).Dur("wait_left", left).Msg("engine away: waiting for it")
		t0 := time.Now()
		werr := l.waitEngine(ctx, left)
		// Each try costs at least one poll, so that an engine that answers pings but
		// fails every create cannot make this loop spin.
		if d := time.Since(t0); d < engineWaitPoll {
			select {
			case <-time.After(engineWaitPoll - d):
			case <-ctx.Done():
			}
		}
		waited += time.Since(t0)
		if ctx.Err() != nil {
			return Result{}, waited, ctx.Err()
		}
		if werr != nil {
			return res, waited, engineWaitError(err, func(v backend.Vars) string {
				return fmt.Sprintf("%v (the engine did not answer again within %s: %s, or the call's timeout)", err, bound, v.Name(SettingEngineWait))
			})
		}
		l.log.Info().Dur("waited", waited).Msg("engine back: running the call in a new sandbox")
	}
}

// SettingEngineWait bounds how long a call waits for an engine that went away
// (Options.EngineWait).
const SettingEngineWait backend.Setting = "engine-wait-s"

// engineWaitError is err, the engine's, after the wait: the message says how long the
// call waited and names the setting that bounds it.
func engineWaitError(err error, text func(backend.Vars) string) error {
	return &backend.SettingError{Setting: SettingEngineWait, Err: err, Text: text}
}

// engineAway reports whether err came from the engine going away rather than from
// the sandbox or the program: ErrEngineUnavailable, or a broken sandbox while the
// engine does not answer a ping.
func (l *Launcher) engineAway(ctx context.Context, err error) bool {
	switch {
	case errors.Is(err, ErrEngineUnavailable):
		return true
	case errors.Is(err, ErrSandbox):
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return l.ping(pctx) != nil
	}
	return false
}

// waitEngine waits until the engine answers a ping, for at most d.
func (l *Launcher) waitEngine(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := l.ping(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the engine: %w", err)
		case <-time.After(engineWaitPoll):
		}
	}
}

// ping asks whether the engine answers.
func (l *Launcher) ping(ctx context.Context) error { return l.be.Ping(ctx) }
