package launcher

import (
	"context"
	"errors"
	"time"
)

// Metrics receives the launcher's events; cmd/mcp-exec backs it with Prometheus. The
// launcher calls it from many goroutines. A nil Options.Metrics records nothing.
type Metrics interface {
	// ExecDone is called once per Run with its outcome (see Outcome).
	ExecDone(outcome string, r Result)
	ContainerCreated()
	ContainerRemoved()
	CleanupFailed()
	EngineError()
}

// Outcomes of a Run, as reported to Metrics.
const (
	OutcomeOK        = "ok"        // exit code 0
	OutcomeNonZero   = "non_zero"  // any other exit code, not a timeout or OOM kill
	OutcomeTimeout   = "timeout"   // killed by the wall-clock limit
	OutcomeOOM       = "oom"       // the kernel killed a process of the program for memory
	OutcomeCancelled = "cancelled" // the caller went away or the server shut down
	OutcomeBusy      = "busy"      // refused: every slot taken and the queue full
	OutcomeError     = "error"     // infrastructure failure
)

// Outcome classifies a Run's return.
func Outcome(r Result, err error) string {
	switch {
	case errors.Is(err, ErrBusy):
		return OutcomeBusy
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrClosed):
		return OutcomeCancelled
	case err != nil:
		return OutcomeError
	case r.TimedOut:
		return OutcomeTimeout
	case r.OOMKilled:
		return OutcomeOOM
	case r.ExitCode != 0:
		return OutcomeNonZero
	}
	return OutcomeOK
}

type noMetrics struct{}

func (noMetrics) ExecDone(string, Result) {}
func (noMetrics) ContainerCreated()       {}
func (noMetrics) ContainerRemoved()       {}
func (noMetrics) CleanupFailed()          {}
func (noMetrics) EngineError()            {}

// since is time.Since, kept apart so that a Result's timings read as one place.
func since(t time.Time) time.Duration { return time.Since(t) }
