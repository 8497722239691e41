// Package launchertest gives tests a live launcher: on the Docker/Podman backend, at
// the engine the tests run against (DOCKER_HOST, else the discovered socket), with an
// instance name of its own, skipped outside CI when no engine answers and failed
// inside it (CI=true), and checked at the end: closed cleanly, no sandbox of its
// instance left, no goroutine it started still running.
//
// Buffer is the other thing tests across packages need: a log or output sink that
// goroutines write to while the test reads it (launcher/launchertest/syncbuf's). The
// seccomp tests of several packages share seccomp.go (the calls the bootstrap's filter
// must refuse), and the RLIMIT_NPROC tests neighbour.go.
//
// The set-up itself (the engine, the environment's options, the check, the reap, the
// close at the end) is launcher/enginetest's, which the launcher package's own
// (internal) tests use too: they cannot import this package, since it imports launcher.
package launchertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"go.uber.org/goleak"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

// Client returns a client of the engine the tests run against, closed when the test
// ends.
func Client(t testing.TB) *client.Client {
	t.Helper()
	return enginetest.Client(t)
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_.-]+`)

// Instance is a label value unique to this run of t: its name, made safe, and a
// random suffix.
func Instance(t testing.TB) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-.")
	return "test-" + name[:min(len(name), 48)] + "-" + hex.EncodeToString(b)
}

// Unchecked returns a launcher on cli, with opts' Image and Logger filled in when
// empty, that has not talked to the engine.
func Unchecked(t testing.TB, cli docker.Client, opts launcher.Options) *launcher.Launcher {
	t.Helper()
	return unchecked(t, cli, opts, nil)
}

// Wrap changes the backend of a launcher that NewWith makes (a test's weakened or
// instrumented engine: Unconfined, WithoutBootFilter).
type Wrap func(cli docker.Client, be *docker.Backend) launcher.Backend

func unchecked(t testing.TB, cli docker.Client, opts launcher.Options, wrap Wrap) *launcher.Launcher {
	t.Helper()
	if opts.Image == "" {
		opts.Image = enginetest.Image()
	}
	if opts.Instance == "" {
		opts.Instance = Instance(t)
	}
	if reflect.ValueOf(opts.Logger).IsZero() {
		opts.Logger = enginetest.Logger(t)
	}
	be, err := docker.New(cli, opts.Logger)
	if err != nil {
		t.Fatal(err)
	}
	var lbe launcher.Backend = be
	if wrap != nil {
		lbe = wrap(cli, be)
	}
	l, err := launcher.New(lbe, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// New returns a started launcher (checked, its instance's leftovers reaped, its pool
// filling) at the tests' engine. MCP_EXEC_TEST_POOL_SIZE sets the pool size and
// MCP_EXEC_TEST_RUNTIME the runtime when opts leaves them zero. At the end it closes
// the launcher and fails the test if a sandbox of its instance or a goroutine started
// since New is left.
func New(t testing.TB, opts launcher.Options) *launcher.Launcher {
	t.Helper()
	return NewWith(t, opts, nil)
}

// NewWith is New with the backend changed by wrap (nil: unchanged).
func NewWith(t testing.TB, opts launcher.Options, wrap Wrap) *launcher.Launcher {
	t.Helper()
	before := goleak.IgnoreCurrent()
	cli, err := engine.NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = enginetest.PoolSize()
	}
	if opts.Runtime == "" {
		opts.Runtime = enginetest.Runtime()
	}
	l := unchecked(t, cli, opts, wrap)
	enginetest.CloseAtEnd(t, l, func(ctx context.Context) {
		if ids, err := l.Sandboxes(ctx); err != nil {
			t.Errorf("listing sandboxes: %v", err)
		} else if len(ids) != 0 {
			t.Errorf("got %d sandboxes left with instance %q, want 0", len(ids), l.Options().Instance)
		}
		cli.Close()
		if err := goleak.Find(before); err != nil {
			t.Errorf("goroutines left by the launcher: %v", err)
		}
	})
	enginetest.CheckAndReap(t, l)
	l.StartPool()
	return l
}

// HostUDS reports whether the tests' runtime lets a sandbox connect to a host Unix
// socket mounted into it (an egress channel), as the engine's own configuration says:
// any runtime but gVisor's, and runsc when its runtimeArgs hold --host-uds=open or
// =all. It is the oracle that the launcher's start-up check (CheckEgress) is compared
// with; a gVisor runtime the engine does not list fails the test.
func HostUDS(t testing.TB, runtime string) bool {
	t.Helper()
	if !backend.GVisor(runtime) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := Client(t).Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := info.Info.Runtimes[runtime]
	if !ok {
		t.Fatalf("the engine lists no runtime %q", runtime)
	}
	for _, a := range r.Args {
		switch strings.TrimLeft(a, "-") {
		case "host-uds=open", "host-uds=all":
			return true
		}
	}
	return false
}

// Buffer is syncbuf.Buffer, the sink that goroutines write to while the test reads
// it, under the name the tests that use a live launcher know.
type Buffer = syncbuf.Buffer
