package launcher

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
	"github.com/mcp-exec/mcp-exec/launcher/process"
)

var processSubreaper = sync.OnceValue(process.MakeSubreaper)

// testProcessLauncher is testLauncher for MCP_EXEC_TEST_BACKEND=process: the launcher
// suite against the process backend (standalone mode). It is meant to run inside the
// standalone image with docs/standalone.md's docker run flags (e2e's
// TestStandaloneLauncherSuite does that), where the test binary plays the server.
func testProcessLauncher(t testing.TB, opts Options) *Launcher {
	t.Helper()
	if err := processSubreaper(); err != nil {
		t.Fatal(err)
	}
	opts.Logger = enginetest.Logger(t)
	if opts.MaxConcurrent == 0 {
		// Serialized, as the server runs this backend; the suite's parallel subtests
		// wait their turn (the server's default queue).
		opts.MaxConcurrent = 1
		if opts.MaxQueue == 0 {
			opts.MaxQueue = 64
		}
	}
	// Runs get their directories (and the wipe its scope) under a directory of their
	// own: the test binary's own temporary directories are in /tmp too.
	if err := os.MkdirAll("/tmp/process-suite", 0o700); err != nil {
		t.Fatal(err)
	}
	be := process.New(process.Options{Scratch: "/tmp/process-suite", Wipe: true, Log: opts.Logger})
	l, err := New(be, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		t.Fatalf("process backend check: %v", err)
	}
	enginetest.StartPool(t, l, func(ctx context.Context) {
		if ids, _ := be.List(ctx, ""); len(ids) != 0 {
			t.Errorf("got %d runs left, want 0: %v", len(ids), ids)
		}
		if err := be.Close(ctx); err != nil {
			t.Errorf("closing backend: %v", err)
		}
	})
	return l
}
