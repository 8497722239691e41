// Package launcher runs untrusted Python programs, each in a throwaway sandbox of its
// own, through a Backend: launcher/docker (Docker or Podman containers), launcher/kube
// (Kubernetes pods) or launcher/process (child processes: the standalone mode).
//
// The launcher owns everything that is the same for every backend: the bootstrap
// (boot.py, PID 1 of every sandbox) and its protocol (launcher/wire), jobs and results, the
// output cap, files in and out, the warm pool, slots and the queue, timeouts, the
// limits check (VerifyLimits), removal with retries (the janitor), reaping by label,
// and metrics. A Backend only makes, starts, kills, inspects, removes and lists
// sandboxes from a backend-neutral Spec (SpecOf), and must apply every field of it.
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
//   - Every sandbox is described by SpecOf alone (image, bootstrap command, an
//     environment with nothing of the server's, user 65532, the private /tmp, memory
//     with no swap, pids and CPU limits, labels) and hardened by its backend in one
//     pure function (docker.ContainerSpec: no network, read-only root, all
//     capabilities dropped, no-new-privileges, seccomp without io_uring, ptrace and
//     the process_vm and pidfd_getfd calls, a noexec /tmp tmpfs, no log driver).
//   - Whatever the backend's profile, the bootstrap installs launcher/syscalls' seccomp
//     filter on itself before it reads anything of the caller's (the last argument of
//     its command; boot.py's install_filter), so every process of the sandbox runs
//     under it; a bootstrap that cannot install it runs nothing, and VerifyLimits
//     refuses a sandbox where io_uring_setup is not refused.
//   - A job with Job.Egress (egress.go) is the one exception to "SpecOf alone": its
//     cold sandbox is SpecOf plus its own egress channel's directory, bind-mounted
//     read-only at /egress, and the proxy variables; it still has no network. Warm
//     sandboxes never hold a channel. A session with SessionOptions.Egress is the same
//     exception for its SessionSpec: one channel per session sandbox, closed with it.
//   - Caller data (code, stdin) travels only over the attached stdin stream, and output
//     only over the attached stdout stream. Neither is ever in the container's
//     command, environment, labels or logs, nor in a file on the host, nor in our logs.
//   - One sandbox serves one job and is then killed and removed, on every path:
//     result, error, timeout, cancellation, Close. Removal runs on a context of its
//     own; one that fails is retried every 10 s while the launcher runs, and Reap
//     removes at start what a killed server left.
//   - A launcher removes only its own sandboxes and those of servers proven gone:
//     servers sharing an engine may share an instance name, so with Options.Owner
//     every sandbox names its server process, and another's is removed only when
//     /proc proves that process gone or the sandbox has long ended (owners.go).
//   - Every sandbox is tracked from the answer to its create until its removal is
//     confirmed. A sandbox of its own that is not tracked (a create whose answer
//     was lost) is removed once seen for longer than a create may take (orphans.go),
//     and Close removes whatever of its own the engine still holds.
//   - An engine that goes away (ErrEngineUnavailable, or a broken sandbox while the
//     engine does not answer) does not fail a call at once: it waits for the engine,
//     within Options.EngineWait and its own timeout, and runs in a new sandbox with
//     its whole timeout (enginewait.go).
//   - The result comes from the bootstrap (boot.py), PID 1 of the container, which the
//     program can neither signal nor trace (under gVisor, which delivers SIGKILL and
//     SIGSTOP to a namespace's init, it can end or stall its own run that way, nothing
//     more); the program's output reaches the server only wrapped in frames, so the
//     program cannot forge an exit status, and its output never becomes a tool call
//     (bridge.go: calls come from a pipe of their own that the bootstrap relays, and
//     Tools.Serve checks every call). The server still enforces the output cap
//     and the timeout itself.
//   - Before the program forks, the bootstrap reads /proc/self/mountinfo and refuses
//     (an F frame naming each) any read-write mount the sandbox's user can write that
//     no wipe covers (the private tmpfs /tmp, /dev/shm, /dev/mqueue are wiped with the
//     sandbox; kernel filesystems, /proc and /sys aside): a volume, a bind from the
//     host, a runtime's extra tmpfs, a webhook's hostPath, or the kubelet's termination-
//     message file where the user can reach it (launcher/kube puts it in root's 0700
//     home). TestBootRefusesWritableMount.
//   - Under gVisor (Options.GVisor) the same contract holds by gVisor's means: the
//     process limit is RLIMIT_NPROC inside gVisor's kernel with the host's pids cgroup
//     as a backstop (backend.GVisorHostPids), the seccomp profile allows clone3, and
//     an OOM kill is told by the program's SIGKILL (docs/engines.md).
//
// # Lifecycle of a job
//
//	Backend.Create → Backend.Start (streams attached before anything runs, so no
//	output is lost) → the bootstrap's ready frame (a warm pool keeps sandboxes here)
//	→ write "MCPEXEC2 <code bytes> <files bytes>\n", the code and the input files,
//	start the timeout → write stdin, half-close (with Job.Tools: the MCPEXEC3
//	header, the tools and stdin with the code, then reply frames to the program's
//	calls until its end; bridge.go) → read frames until the exit frame
//	(result), the timeout (Backend.Kill: every process of the program dies with the
//	sandbox), the stream's end without an exit frame (Backend.Inspect says how it
//	ended) or the caller's cancellation → Backend.Remove in the background.
package launcher
