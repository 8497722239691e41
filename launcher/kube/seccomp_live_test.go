package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// TestLiveRuntimeDefaultDeniesSyscalls: a pod under RuntimeDefault (no
// --kube-seccomp-profile: containerd's profile, which allows io_uring) refuses every
// call of launcher/syscalls' table, io_uring_setup, unshare(CLONE_NEWUSER), keyctl,
// bpf, userfaultfd and perf_event_open among them, because the bootstrap installs its
// filter; threads and processes still start, and the start-up check passes. The
// control, the same pod with a bootstrap that does not install the filter, gets a ring
// from io_uring_setup, and the start-up check refuses it naming --kube-seccomp-profile.
func TestLiveRuntimeDefaultDeniesSyscalls(t *testing.T) {
	be, admin := liveBackend(t, Options{})
	if be.opts.SeccompProfile != "" {
		t.Fatalf("backend's seccomp profile: got %q, want none (RuntimeDefault)", be.opts.SeccompProfile)
	}
	t.Run("filter", func(t *testing.T) {
		l := testLauncherOn(t, be, admin, launcher.Options{Instance: testInstance(t)})
		calls := launchertest.RunDeniedCalls(t, l)
		for _, bad := range launchertest.DeniedCallsWant(calls) {
			t.Error(bad)
		}
		if err := l.VerifyLimits(t.Context()); errors.Is(err, launcher.ErrSeccompNotEnforced) {
			t.Errorf("start-up check: %v", err)
		}
	})
	t.Run("control", func(t *testing.T) {
		l := testLauncherOn(t, launchertest.WithoutBootFilter(be), admin, launcher.Options{Instance: testInstance(t)})
		calls := launchertest.RunDeniedCalls(t, l)
		t.Logf("RuntimeDefault without the bootstrap's filter: %v", calls)
		if got := calls["io_uring_setup"]; got != "allowed" {
			t.Errorf("io_uring_setup under RuntimeDefault alone: got %q, want allowed (containerd's profile allows it; else the node refuses io_uring itself, and the test proves less)", got)
		}
		err := l.VerifyLimits(t.Context())
		if !errors.Is(err, launcher.ErrSeccompNotEnforced) || !strings.Contains(err.Error(), "--kube-seccomp-profile") {
			t.Errorf("start-up check without the filter: got %v, want ErrSeccompNotEnforced naming --kube-seccomp-profile", err)
		}
	})
}
