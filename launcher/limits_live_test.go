package launcher

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
)

// TestVerifyLimitsUnenforcedLive: against an engine known to drop the limits (rootless
// Podman on cgroup v1, as scripts/podman.sh --rootless sets up), VerifyLimits must say
// that none of memory, pids and CPU is applied, which makes the server refuse to start.
// It runs only when MCP_EXEC_TEST_EXPECT_UNENFORCED=1 says the engine is such a one.
func TestVerifyLimitsUnenforcedLive(t *testing.T) {
	if os.Getenv("MCP_EXEC_TEST_EXPECT_UNENFORCED") != "1" {
		t.Skip("set MCP_EXEC_TEST_EXPECT_UNENFORCED=1 with DOCKER_HOST at an engine that ignores limits")
	}
	l := testLauncher(t, Options{})
	err := l.VerifyLimits(t.Context())
	if !errors.Is(err, ErrLimitsNotEnforced) {
		t.Fatalf("VerifyLimits: got %v, want ErrLimitsNotEnforced", err)
	}
	for _, limit := range []string{"memory (", "pids (", "cpus ("} {
		if !strings.Contains(err.Error(), limit) {
			t.Errorf("VerifyLimits error does not name %q: %v", limit, err)
		}
	}
	t.Logf("as expected: %v", err)
}

// TestRuntimeLive: with MCP_EXEC_TEST_RUNTIME set (scripts/test.sh sets crun after
// scripts/crun.sh), the integration tests' launcher must run its sandboxes under that
// OCI runtime, as the engine records it; otherwise the suite would silently test the
// default runtime.
func TestRuntimeLive(t *testing.T) {
	want := os.Getenv("MCP_EXEC_TEST_RUNTIME")
	if want == "" {
		t.Skip("MCP_EXEC_TEST_RUNTIME is not set")
	}
	l := testLauncher(t, Options{PoolSize: -1})
	if got := l.Options().Runtime; got != want {
		t.Fatalf("testLauncher's runtime: got %q, want %q (MCP_EXEC_TEST_RUNTIME)", got, want)
	}
	cli := enginetest.Client(t)
	done := make(chan error, 1)
	go func() {
		res, err := l.Run(context.Background(), Job{Code: "import time; print('up', flush=True); time.sleep(3)"})
		if err == nil && res.Stdout != "up\n" {
			err = errors.New("unexpected output " + res.Stdout)
		}
		done <- err
	}()
	f := make(client.Filters).Add("label", LabelInstance+"="+l.Options().Instance)
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list, err := listContainers(t.Context(), cli, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			id = list.Items[0].ID
		}
	}
	if id == "" {
		t.Fatal("no sandbox appeared")
	}
	info, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Container.HostConfig.Runtime; got != want {
		t.Errorf("the engine runs the sandbox under runtime %q, want %q", got, want)
	}
	if err := <-done; err != nil {
		t.Errorf("run under %s: %v", want, err)
	}
}
