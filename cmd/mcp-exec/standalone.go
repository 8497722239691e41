package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/process"
)

// newProcessLauncher is newLauncher for the process backend (standalone mode): it
// refuses to start unless the container is locked down, then runs each exec as a
// child process. Its errors name the missing lock and the flag that provides it.
func newProcessLauncher(ctx context.Context, cfg Config, log zerolog.Logger, m *metrics, verify bool) (*launcher.Launcher, func(), error) {
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
		Network:      cfg.Transport != "stdio",
		EgressDenied: cfg.EgressDenied,
		Probes:       splitList(cfg.EgressProbes),
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
		Msg("standalone lockdown verified: not root, no capabilities, no-new-privileges, read-only root, /tmp a sized tmpfs, no usable swap beyond the memory limit, a seccomp filter per run (a child saw EPERM from io_uring and the rest); " + networkNote(lock.Network))
	ignoreSignals(ctx, log)

	be := process.New(process.Options{
		Scratch: "/tmp",
		Wipe:    true,
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
		if n := be.KillActive(); n > 0 {
			log.Warn().Str("signal", sig.String()).Int("runs_killed", n).Msg("a stop signal arrived while runs were under way (a program may have sent it): killed the runs, not stopping; send it again once idle to stop")
			return false
		}
		return true
	})
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
// mode, Config.Validate).
func dropTokenFile(path string) error {
	if path == "" {
		return nil
	}
	rmErr := os.Remove(path)
	f, err := os.Open(path)
	if err == nil {
		f.Close()
		return fmt.Errorf("refusing to start the process backend (standalone mode): the token file %s is still readable after start-up (removing it: %v), and programs run as the server's user: put it where the server can remove it (a writable tmpfs), or set %s to the token's SHA-256 instead, which gives programs nothing", path, rmErr, cfgName("auth-token-sha256"))
	}
	if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("checking the token file %s: %w", path, err)
	}
	return nil
}

// ignoreSignals handles the signals a program could send the server (it runs as the
// same user) that would otherwise end it: as PID 1 of its container, a signal with a
// handler is delivered and one without is dropped, so SIGKILL and SIGSTOP from a
// program never arrive, and these are logged and ignored. SIGTERM and SIGINT stop
// the server gracefully (the orchestrator needs them): a program can send them too,
// and the restart policy brings the server back (docs/standalone.md).
func ignoreSignals(ctx context.Context, log zerolog.Logger) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-ch:
				log.Warn().Str("signal", strings.ToUpper(s.String())).Msg("ignored a signal (programs run as the server's user)")
			}
		}
	}()
}
