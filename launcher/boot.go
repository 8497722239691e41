package launcher

import _ "embed"

// bootSource is the sandbox bootstrap (boot.py). It is passed as the container's
// command, so any image with a Python 3.9+ interpreter can serve as a sandbox: the
// image needs no file of ours and cannot drift from the server's protocol.
//
//go:embed boot.py
var bootSource string
