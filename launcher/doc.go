// Package launcher runs untrusted Python programs, one per throwaway sibling
// container, through a Docker or Podman engine's API.
//
// # Threat model
//
// The code is hostile: written by a model that may have been steered by anything it
// read. It may try to reach the network, the engine's socket, the host's files, the
// server's environment or other callers' data; to exhaust memory, processes, CPU, disk
// or output; to outlive its call; or to forge its own result. Containers share the
// host's kernel, so the kernel's attack surface is narrowed (seccomp, no
// capabilities, no new privileges, an unprivileged user) but not removed; deployers who
// need more choose a user-space kernel with Options.Runtime (gVisor's runsc).
//
// # Invariants
//
//   - Every container is configured by containerSpec alone: no network, read-only
//     root, all capabilities dropped, no-new-privileges, seccomp (the engine's default
//     minus io_uring), user 65532, a private noexec /tmp tmpfs, memory (no swap), pids
//     and CPU limits, no log driver, and an environment with nothing of the server's.
//   - Caller data (code, stdin) travels only over the attached stdin stream, and output
//     only over the attached stdout stream. Neither is ever in the container's
//     command, environment, labels or logs, nor in a file on the host, nor in our logs.
//   - One container serves one job and is then killed and removed, on every path:
//     result, error, timeout, cancellation, Close. Removal runs on a context of its own.
//   - The result comes from the bootstrap (boot.py), PID 1 of the container, which the
//     program can neither signal nor trace; the program's output reaches the server only
//     wrapped in frames, so the program cannot forge an exit status. The server still
//     enforces the output cap and the timeout itself.
//
// # Lifecycle of a job
//
//	create → attach (before start, so no output is lost) → start → write
//	"MCPEXEC1 <n>\n" + code, start the timeout → write stdin, half-close →
//	read frames until the exit frame (result), the timeout (kill: every process of the
//	program dies with the container) or the caller's cancellation → kill and remove in
//	the background.
package launcher
