// Package process runs sandboxes as child processes of the server, for the standalone
// mode: the server and Python share one locked-down container and there is no engine.
// Lockdown checks, before any run, that the container gives what this needs.
//
// The program is hostile and runs as the server's own user, so what separates it from
// the server and from the next run is what the kernel gives one unprivileged process
// over another of the same user, plus the container around both. The invariants:
//   - The server is non-dumpable and a child subreaper (MakeSubreaper); a run gets its
//     three pipes and a fixed environment, never the server's (Start, Create).
//   - Each run starts through a wrapper, this binary re-executed (wrap.go: confine),
//     that applies its rlimits, gives it to the OOM killer first, keeps every process
//     it starts below it, and installs a seccomp filter of its own (seccomp.go) with
//     the signal guard (signalguard.go) that keeps it from signalling the server.
//   - A run's leftovers are found by their place in the server's tree, never guessed:
//     Kill ends them (killAll under Options.Serial where it may, else killTree); a sweep
//     kills any child of the server that is not a live run's wrapper.
//   - Each run has a fresh private directory; the wipe between runs and the start-up
//     check of writable mounts (mounts.go) keep one run's files from the next.
//
// What holds only per container (network, cgroup limits, the runtime's profile), and
// why runs are serial, is in docs/standalone.md.
package process
