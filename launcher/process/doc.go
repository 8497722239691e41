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
//     container's runtime applies. The start-up check proves it from a child.
//   - Kill stops and then kills every descendant of the run (found in /proc), round
//     after round until none is left. The server is itself a child subreaper (and PID 1
//     of the container): a process orphaned above the run's bootstrap (the program
//     killed its own bootstrap) is reparented to the server, and any child of the server
//     that is not a run's live bootstrap is, by that rule, a leftover of a run that has
//     ended: the sweep kills it at once. That is how leftovers are attributed when runs
//     are concurrent: by position in the tree, never by guessing.
//   - Each run gets a fresh directory under the scratch root (/tmp), mode 0700, as its
//     working directory and HOME, removed after the run whatever happened. When no run is
//     active the scratch root, /dev/shm and the System V IPC objects of the user are
//     wiped too, so that nothing a run left anywhere writable reaches the next one.
//
// What only holds per container (the engine backends give it per exec): the network
// namespace, the runtime's own seccomp profile (the per-run filter adds to it), the
// memory, pids and CPU cgroup limits, the filesystem view. Concurrent
// runs (MaxConcurrent > 1) share the user and can see each other; runs are serialized
// by default. The program can signal the server: as PID 1 of its container the server
// receives only the signals it handles (SIGKILL and SIGSTOP from inside the container
// are dropped by the kernel), but SIGTERM ends it, and the orchestrator restarts it.
package process
