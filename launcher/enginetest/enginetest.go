// Package enginetest is the live-engine setup that every test of a launcher shares:
// launchertest's, for the packages that import the launcher, and the launcher's own
// (internal) tests, which cannot import launchertest since it imports the launcher.
// So it imports neither the launcher nor launchertest: it knows the engine the tests
// run against (DOCKER_HOST, else the discovered socket), what the test's environment
// sets for a launcher (MCP_EXEC_IMAGE, MCP_EXEC_TEST_POOL_SIZE, MCP_EXEC_TEST_RUNTIME),
// and a launcher's start and end through a small interface: checked (skipped outside
// CI when no engine answers, failed inside it, CI=true), its leftovers reaped, closed
// at the end on a short context of its own.
package enginetest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

// Client returns a client of the engine the tests run against, closed when the test
// ends.
func Client(t testing.TB) *client.Client {
	t.Helper()
	return ClientAt(t, "")
}

// ClientAt returns a client of the engine at host ("": the tests' engine), closed
// when the test ends.
func ClientAt(t testing.TB, host string) *client.Client {
	t.Helper()
	cli, err := engine.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Image is the sandbox image the tests' environment names (MCP_EXEC_IMAGE), "" for the
// launcher's default.
func Image() string { return os.Getenv("MCP_EXEC_IMAGE") }

// PoolSize is the warm pool's size the tests' environment asks for
// (MCP_EXEC_TEST_POOL_SIZE: CI runs the launcher's suites cold and warm), 0 if none.
func PoolSize() int {
	n, _ := strconv.Atoi(os.Getenv("MCP_EXEC_TEST_POOL_SIZE"))
	return n
}

// Runtime is the OCI runtime the tests' environment asks for (MCP_EXEC_TEST_RUNTIME:
// CI runs suites under crun and runsc too), "" for the engine's default.
func Runtime() string { return os.Getenv("MCP_EXEC_TEST_RUNTIME") }

// Logger is a launcher's logger in a test: the test's log, at debug level.
func Logger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

// Launcher is what the set-up needs of a launcher (*launcher.Launcher).
type Launcher interface {
	Check(ctx context.Context) error
	Reap(ctx context.Context) (int, error)
	StartPool()
	Close(ctx context.Context) error
}

// CheckAndReap checks l's engine (skipped outside CI, failed in it, when none answers)
// and, like the server at start, removes what an earlier, interrupted run of the test left.
func CheckAndReap(t testing.TB, l Launcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no engine: %v (run scripts/engine.sh and scripts/images.sh)", err)
		}
		t.Fatalf("engine check: %v", err)
	}
	if _, err := l.Reap(ctx); err != nil {
		t.Fatalf("reaping leftovers: %v", err)
	}
}

// StartPool starts l's pool and closes l at the end of the test (CloseAtEnd).
func StartPool(t testing.TB, l Launcher, left func(ctx context.Context)) {
	t.Helper()
	l.StartPool()
	CloseAtEnd(t, l, left)
}

// CloseAtEnd closes l at the end of the test, then calls left on the same short
// context (detached from the test's), which fails the test if something of l is left.
func CloseAtEnd(t testing.TB, l Launcher, left func(ctx context.Context)) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("closing launcher: %v", err)
		}
		left(ctx)
	})
}
