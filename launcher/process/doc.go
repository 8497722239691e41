// Package process runs sandboxes as child processes of the server, for the standalone
// mode: the server and Python share one locked-down container and there is no engine.
//
// Threat model. The program is hostile and runs as the server's own user (a container
// started with --cap-drop ALL cannot switch users). What separates it from the server
// and from the next run is therefore what the kernel gives one unprivileged process
// over another of the same user, plus the container around both:
//
//   - The server is non-dumpable (PR_SET_DUMPABLE 0): /proc/<server>/{environ,mem,fd,
//     maps} and ptrace are closed to the program. Every descriptor of the server is
//     close-on-exec; a run gets its three pipes and nothing else. Its environment is a
//     fixed list (the sandbox's), never the server's.
//   - Each run is started through a small wrapper (this binary re-executed, see wrap.go)
//     that applies the run's rlimits, raises its oom_score_adj to 1000 (the kernel's
//     OOM killer picks the run, not the server), makes the run a child subreaper, and
//     execs the bootstrap. So every process the run starts stays below the run's own
//     bootstrap process, however it forks, setsids or double-forks. Last, the wrapper
//     installs a seccomp filter of the run's own (seccomp.go) that denies the syscalls
//     of launcher/syscalls with EPERM (io_uring, ptrace, process_vm_readv/writev,
//     pidfd_getfd: what the container backends remove from their profile) and kills
//     the process on a call of a foreign ABI (i386, x32, arm32), whatever profile the
//     container's runtime applies. The start-up check proves it from a child. The
//     same filter carries the signal guard (signalguard.go): kill, tgkill,
//     rt_tgsigqueueinfo and pidfd_open aimed at the server (pid 1, its pid, process
//     group and threads), tkill, rt_sigqueueinfo and pidfd_send_signal at all, fcntl
//     F_SETOWN/F_SETOWN_EX/F_SETSIG, and prlimit64 on another process are EPERM. The
//     wrapper starts a session of its own (no controlling terminal, no way into the
//     server's process group).
//   - With Options.Serial (the standalone mode), at most one run has processes: a
//     run's sandbox is started only once every earlier run is removed, and Kill ends
//     a run with one kill(-1, SIGKILL) from a helper (this binary re-executed), which
//     the kernel delivers to every process of the user but the sender and init in one
//     pass, so no fork or SIGCONT can outrun it. A run's code is not written while any
//     process of another run is left below the server; Remove fails (and the run
//     stays, so the next call fails cleanly) while one is.
//   - Otherwise Kill stops and then kills every descendant of the run (found in
//     /proc), round after round, stopping again what was continued, and sends SIGKILL
//     to every process it saw however the rounds end. The server is itself a child subreaper (and PID 1
//     of the container): a process orphaned above the run's bootstrap (the program
//     killed its own bootstrap) is reparented to the server, and any child of the server
//     that is not a run's live bootstrap is, by that rule, a leftover of a run that has
//     ended: the sweep kills it at once. That is how leftovers are attributed when runs
//     are concurrent: by position in the tree, never by guessing.
//   - Each run gets a fresh directory under the scratch root (/tmp), mode 0700, as its
//     working directory and HOME, removed after the run whatever happened. When no run is
//     active the scratch root, /dev/shm and the System V IPC objects of the user are
//     wiped too, so that nothing a run left anywhere writable reaches the next one.
//     The start-up check refuses any other mount a run could write (mounts.go): a
//     directory mounted read-write (a tmpfs or volume the operator added, whatever its
//     mode), a file mounted read-write that the user can write (Kubernetes'
//     /dev/termination-log), a writable directory or file on /dev itself.
//
// What only holds per container (the engine backends give it per exec): the network
// namespace, the runtime's own seccomp profile (the per-run filter adds to it), the
// memory, pids and CPU cgroup limits, the filesystem view. Concurrent runs, or a warm
// sandbox beside a run, would share the user and could reach each other (a run could
// open the other's stdin through /proc/<pid>/fd/0): the standalone mode refuses a pool
// or concurrency above 1 and sets Serial. The server ignores every signal it need not
// handle (as PID 1, an ignored signal is dropped by the kernel), and the signal guard
// keeps programs from sending it the rest (SIGTERM, SIGINT) or a fault signal with a
// forged si_code.
package process
