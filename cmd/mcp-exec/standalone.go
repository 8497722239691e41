package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/process"
)

// scratchRoot is where the process backend's runs get their directories: the
// container's tmpfs, which the wipe between runs covers (with /dev/shm and /dev/mqueue).
const scratchRoot = "/tmp"

// newProcessLauncher is newLauncher for the process backend (standalone mode): it
// refuses to start unless the container is locked down, then runs each exec as a
// child process. Its errors name the missing lock and the flag that provides it.
func newProcessLauncher(ctx context.Context, cfg config.Config, log zerolog.Logger, m *metrics, verify bool) (*launcher.Launcher, func(), error) {
	if err := checkAlone(cfg); err != nil {
		return nil, nil, err
	}
	// First of all, before anything can run: leftovers come back to the server, and
	// its memory, environment and descriptors are closed to same-user processes.
	if err := process.MakeSubreaper(); err != nil {
		return nil, nil, err
	}
	if err := dropTokenFile(cfg.AuthTokenFile); err != nil {
		return nil, nil, err
	}
	lock := process.Lockdown{
		MaxTmpfs:     cfg.TmpfsSize,
		Scratch:      scratchRoot,
		Network:      cfg.Transport != "stdio",
		EgressDenied: cfg.EgressDenied,
		Probes:       config.SplitList(cfg.EgressProbes),
		Python:       cfg.Python,
		Pids:         cfg.Pids,
	}
	st, err := lock.Check(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("refusing to start the process backend (standalone mode):\n%w", err)
	}
	ev := log.Info()
	if lock.Network {
		// Loudly either way: programs share this network namespace.
		ev = log.Warn().Strs("egress_probes_unreachable", st.ProbedEgress)
	}
	for _, n := range st.Notes {
		log.Warn().Msg("standalone lockdown: " + n)
	}
	ev.Int("uid", st.UID).Int64("tmp_bytes", st.TmpfsBytes).Strs("interfaces", st.Interfaces).
		Bool("network", lock.Network).Strs("seccomp_child", st.Seccomp).
		Int64("uid_tasks_host", st.UIDTasksHost).Int64("uid_tasks_here", st.UIDTasksHere).
		Msg("standalone lockdown verified: not root, no capabilities, no-new-privileges, read-only root, /tmp a sized tmpfs, no writable mount outside the wipe, no usable swap beyond the memory limit, a seccomp filter per run (a child saw EPERM from io_uring and the rest); " + networkNote(lock.Network))
	ignoreSignals(ctx, log)

	be := process.New(process.Options{
		Scratch: scratchRoot,
		Wipe:    true,
		Serial:  true,
		Python:  cfg.Python,
		Limits: process.Limits{
			CPUSeconds: int64((cfg.MaxTimeout + 5*time.Second) / time.Second),
			Files:      1024,
		},
		Log: log,
	})
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	l, cleanup, err := startLauncher(cctx, cfg, be, launcherOptions(cfg, "process", m, log), m, log, func(ctx context.Context) {
		if err := be.Close(ctx); err != nil {
			log.Warn().Err(err).Msg("closing the process backend")
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if verify {
		// The container's own cgroup limits are the outer bound of every run (the
		// rlimits are per process): they must be at most the configured ones.
		if err := verifyLimits(ctx, cfg, l, log); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("the container's own limits are the outer bound of every run: %w (docker run --memory 256m --memory-swap 256m --pids-limit 128 --cpus 1; Kubernetes: resources.limits)", err)
		}
	}
	stopOnSignal.Store(func(sig os.Signal) bool {
		// Only a run's processes share the server's user, and none is left once its
		// run is removed: a signal that arrives while no run is under way comes from
		// outside (the orchestrator stopping the container). One that arrives while a
		// run is under way may come from the program: the runs are killed (their
		// callers get a result) and the server stays; the orchestrator, if it was the
		// sender, kills the container at the end of its grace period.
		// The per-run seccomp filter denies programs every way to signal the server
		// it knows of (launcher/process/signalguard.go); this is what remains should
		// one be found: a signal while a run has processes, or within quietAfter of
		// the last one's end (its sender may have just exited), is not obeyed.
		if n := be.KillActive(); n > 0 || !be.Quiet(quietAfter) {
			log.Warn().Str("signal", sig.String()).Int("runs_killed", n).Msg("a stop signal arrived while a run had processes, or just after (a program may have sent it): killed the runs, not stopping; send it again once idle to stop")
			return false
		}
		return true
	})
	if verify {
		if err := checkLanguages(ctx, cfg, l, log); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	l.StartPool()
	name, _ := be.Name(cctx)
	log.Info().Str("engine", name).Int("max_concurrent", cfg.MaxConcurrent).Msg("process backend ready")
	return l, cleanup, nil
}

func networkNote(network bool) string {
	if network {
		return "the network namespace has interfaces besides loopback, which programs share: egress denied outside (MCP_EXEC_STANDALONE_EGRESS_DENIED) and no probe address reachable from a child"
	}
	return "only loopback in the network namespace"
}

// dropTokenFile removes the token file once it has been read (Load read it), and
// refuses to start if it is still readable: a program runs as the server's user and
// could read it. A file on a writable tmpfs can be removed; a bind mount (a compose
// secret) or a read-only mount (a Kubernetes secret volume) cannot: pass the token's
// SHA-256 there, which gives programs nothing (MCP_EXEC_AUTH_TOKEN is refused in this
// mode, config.Config.Validate).
func dropTokenFile(path string) error {
	if path == "" {
		return nil
	}
	rmErr := os.Remove(path)
	f, err := os.Open(path)
	if err == nil {
		f.Close()
		return fmt.Errorf("refusing to start the process backend (standalone mode): the token file %s is still readable after start-up (removing it: %v), and programs run as the server's user: put it where the server can remove it (a writable tmpfs), or set %s to the token's SHA-256 instead, which gives programs nothing", path, rmErr, config.Name("auth-token-sha256"))
	}
	if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("checking the token file %s: %w", path, err)
	}
	return nil
}

// quietAfter is how long after the last run's processes are gone a SIGTERM or SIGINT
// still counts as possibly a program's.
const quietAfter = 2 * time.Second

// ignoreSignals ignores every signal but those the server needs: SIGTERM and SIGINT
// (the orchestrator's stop, handled in main and by stopOnSignal), SIGCHLD (the runs'
// ends: ignoring it would reap them behind os/exec's back), SIGURG (the Go runtime's
// preemption), and SIGKILL and SIGSTOP (which cannot be ignored, and which the kernel
// does not deliver to PID 1 from inside its namespace). As PID 1, a signal it ignores
// (SIG_IGN) is dropped by the kernel, from inside the container or outside; for the
// synchronous ones (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS, SIGTRAP) the Go runtime
// keeps its handler and drops them when sent by kill or tgkill, and the per-run
// seccomp filter denies the calls that could send them with another si_code
// (launcher/process/signalguard.go). Before this, a program's os.kill(1, SIGABRT)
// ended the server with a stack dump.
func ignoreSignals(context.Context, zerolog.Logger) {
	keep := map[syscall.Signal]bool{
		syscall.SIGTERM: true, syscall.SIGINT: true, syscall.SIGCHLD: true, syscall.SIGURG: true,
		syscall.SIGKILL: true, syscall.SIGSTOP: true,
	}
	var sigs []os.Signal
	for s := syscall.Signal(1); s <= 64; s++ {
		if !keep[s] {
			sigs = append(sigs, s)
		}
	}
	signal.Ignore(sigs...)
}

// checkAlone refuses what the process backend cannot make safe: a server that is not
// PID 1 of its PID namespace (then the kernel's shield of init against its namespace's
// signals is not there, nor is every leftover of a run reparented to it, and the
// kill helper's kill(-1) would reach processes that are not the runs'), and a warm
// pool or more than one run at a time (runs share one user, and nothing separates
// them: one could open another's stdin through /proc/<pid>/fd/0 and inject or read
// its code, or read its directory).
func checkAlone(cfg config.Config) error {
	var errs []error
	if pid := os.Getpid(); pid != 1 {
		errs = append(errs, fmt.Errorf("the server is pid %d, not PID 1 of its PID namespace: programs could signal it, their leftovers would not come back to it, and it could not kill them all at once; run the image as the container's own process (docker run without --init; Kubernetes without shareProcessNamespace)", pid))
	}
	if cfg.PoolSize > 0 {
		errs = append(errs, fmt.Errorf("%s is %d: a warm sandbox would wait for the next caller's code while another caller's program runs as the same user, which could open its stdin (/proc/<pid>/fd/0) and inject or read that code; the process backend starts no sandbox ahead of its call: set it to 0 (scale with replicas)", config.Name("pool-size"), cfg.PoolSize))
	}
	if cfg.MaxConcurrent > 1 {
		errs = append(errs, fmt.Errorf("%s is %d: concurrent runs share one user and nothing separates them (one could read the other's stdin, directory or memory); the process backend runs one at a time: set it to 1 (scale with replicas)", config.Name("max-concurrent"), cfg.MaxConcurrent))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("refusing to start the process backend (standalone mode):\n%w", err)
	}
	return nil
}
