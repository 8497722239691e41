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

// TestLanguageFilterUnconfinedEngine: bash and node, which the bootstrap's child execs,
// run under the bootstrap's seccomp filter: with the engine's profile off, only that
// filter can put them in filter mode (Seccomp: 2). The control, without the bootstrap's
// filter, shows mode 0, so the test tells the two apart.
func TestLanguageFilterUnconfinedEngine(t *testing.T) {
	programs := map[string]string{
		"bash":       "grep '^Seccomp:' /proc/self/status | tr -d '\\t '",
		"javascript": "import fs from 'node:fs';\nconsole.log(fs.readFileSync('/proc/self/status', 'utf8').match(/^Seccomp:\\s*(\\d+)/m)[0].replace(/\\s+/g, ''))",
	}
	check := func(t *testing.T, l *launcher.Launcher, want string) {
		t.Helper()
		for lang, code := range programs {
			res, err := l.Run(t.Context(), launcher.Job{Language: lang, Code: code})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != want+"\n" {
				t.Errorf("%s: got %q (stderr %q), want %q", lang, res.Stdout, res.Stderr, want)
			}
		}
	}
	t.Run("filter", func(t *testing.T) {
		check(t, launchertest.NewWith(t, launcher.Options{}, launchertest.Unconfined), "Seccomp:2")
	})
	t.Run("control", func(t *testing.T) {
		l := launchertest.NewWith(t, launcher.Options{}, func(cli docker.Client, be *docker.Backend) launcher.Backend {
			return launchertest.WithoutBootFilter(launchertest.Unconfined(cli, be))
		})
		check(t, l, "Seccomp:0")
	})
}
