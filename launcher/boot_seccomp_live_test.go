package launcher_test

import (
	"errors"
	"testing"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// TestBootFilterUnconfinedEngine: with the engine's seccomp profile off (sandboxes
// created seccomp=unconfined: a runtime whose profile denies less than the launcher's,
// as containerd's RuntimeDefault allows io_uring), every call of launcher/syscalls'
// table is still refused in a sandbox, by the bootstrap's filter alone, and the
// start-up check passes. The control, the same sandbox with a bootstrap that does not
// install the filter, gets a ring from io_uring_setup, and the start-up check refuses
// it (ErrSeccompNotEnforced).
func TestBootFilterUnconfinedEngine(t *testing.T) {
	t.Run("filter", func(t *testing.T) {
		l := launchertest.NewWith(t, launcher.Options{}, launchertest.Unconfined)
		calls := launchertest.RunDeniedCalls(t, l)
		for _, bad := range launchertest.DeniedCallsWant(calls) {
			t.Error(bad)
		}
		if err := l.VerifyLimits(t.Context()); err != nil {
			t.Errorf("start-up check: %v", err)
		}
	})
	t.Run("control", func(t *testing.T) {
		l := launchertest.NewWith(t, launcher.Options{}, func(cli docker.Client, be *docker.Backend) launcher.Backend {
			return launchertest.WithoutBootFilter(launchertest.Unconfined(cli, be))
		})
		calls := launchertest.RunDeniedCalls(t, l)
		t.Logf("without the bootstrap's filter: %v", calls)
		// gVisor's kernel has io_uring off by default (ENOSYS): the filter's EPERM still
		// differs, which the start-up check requires.
		if got := calls["io_uring_setup"]; got != "allowed" && !l.Options().GVisor() {
			t.Errorf("io_uring_setup without the bootstrap's filter: got %q, want allowed (the engine's profile is off; else the host refuses io_uring itself, and the test proves nothing)", got)
		}
		if err := l.VerifyLimits(t.Context()); !errors.Is(err, launcher.ErrSeccompNotEnforced) {
			t.Errorf("start-up check without the filter: got %v, want ErrSeccompNotEnforced", err)
		} else {
			t.Logf("refusal: %v", err)
		}
	})
}
