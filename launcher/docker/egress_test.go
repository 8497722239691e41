package docker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/mount"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// TestEgressMount: a Spec with an egress channel gets its directory, and only it,
// bind-mounted read-only at /egress, and keeps no network; one without gets no mount.
func TestEgressMount(t *testing.T) {
	s := backend.Spec{Image: "img", UID: 65532, GID: 65532, WorkDir: "/tmp", Memory: 1 << 28, Pids: 128, CPUs: 1, TmpfsSize: 1 << 26}
	_, host := ContainerSpec(s, "{}")
	if len(host.Mounts) != 0 || len(host.Binds) != 0 {
		t.Errorf("without a channel: mounts %v, binds %v", host.Mounts, host.Binds)
	}
	s.EgressDir = "/run/mcp-exec-egress/sb-123"
	cfg, host := ContainerSpec(s, "{}")
	want := []mount.Mount{{
		Type: mount.TypeBind, Source: "/run/mcp-exec-egress/sb-123", Target: "/egress", ReadOnly: true,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
	}}
	if diff := cmp.Diff(want, host.Mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if host.NetworkMode != "none" || !cfg.NetworkDisabled {
		t.Errorf("network: mode %q, disabled %v; want none, true", host.NetworkMode, cfg.NetworkDisabled)
	}
}
