package backend

import (
	"errors"
	"time"
)

// Errors of a store of background runs kept outside a server (Kubernetes: in their
// pods). ErrRunNotFound is the same for a handle that never was and another identity's,
// so that a handle's owner is not told.
var (
	ErrRunNotFound = errors.New("no background run has this handle for this identity")
	ErrRunExpired  = errors.New("the run's result was kept for the TTL after it ended, then removed")
	// ErrRunLost: the run's sandbox ended (evicted, its node lost, past its deadline)
	// before its result was fetched; the record stays until the TTL, to say so.
	ErrRunLost = errors.New("the run's sandbox ended before its result was fetched")
)

// RunRecord is a background run as its store keeps it: never the handle, the owner's
// identity or anything of the caller's.
type RunRecord struct {
	Sandbox  string        // the run's sandbox: attach to it for the result
	Started  time.Time     // when it was created
	Timeout  time.Duration // its own timeout
	Ended    time.Time     // when a server first saw it ended; zero before
	Canceled bool          // stopped by run_cancel
}
