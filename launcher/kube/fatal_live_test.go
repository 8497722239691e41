package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// badFilter wraps a backend so that its sandboxes' bootstraps get a seccomp argument they
// refuse: they fail at once, before their filter, their prologue and the key's usual
// place (boot.py's fatal). Tests only.
type badFilter struct{ launcher.Backend }

func (b badFilter) Create(ctx context.Context, spec backend.Spec) (string, error) {
	spec.Command = append([]string(nil), spec.Command...)
	for i, a := range spec.Command {
		if strings.HasPrefix(a, "seccomp=") {
			spec.Command[i] = "seccomp=bad"
		}
	}
	return b.Backend.Create(ctx, spec)
}

// TestLiveEarlyFatal: a pod whose bootstrap fails before it has taken its seal key in the
// usual place reports why: the call's error names the bootstrap's message, sealed on the
// node's log like everything else, not "unknown frame kind".
func TestLiveEarlyFatal(t *testing.T) {
	be, admin := liveBackend(t, Options{})
	l := testLauncherOn(t, badFilter{be}, admin, launcher.Options{})
	_, err := l.Run(t.Context(), launcher.Job{Code: "print(1)", Timeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "bad seccomp filter argument") {
		t.Errorf("got %v, want the bootstrap's message (bad seccomp filter argument)", err)
	}
}
