package launcher

import _ "embed"

// bootSource is the sandbox bootstrap (boot.py). It is passed as the container's
// command, so any image with a Python 3.9+ interpreter can serve as a sandbox: the
// image needs no file of ours and cannot drift from the server's protocol.
//
//go:embed boot.py
var bootSource string

// The bootstrap's own exit statuses, the container's exit code when PID 1 ends by
// itself (boot.py's EXIT_* constants, same names). The program's status travels in the
// exit frame, never as the container's.
const (
	bootExitOK     = 0  // EXIT_OK: the exit frame was sent
	bootExitUsage  = 64 // EXIT_USAGE: wrong arguments
	bootExitFailed = 70 // EXIT_FAILED: the bootstrap failed (an F frame says why)
)
