package launcher

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"
)

// testLauncher returns a launcher against the real engine. Outside CI a missing
// engine skips the test; in CI (CI=true) it fails, since a skipped sandbox test
// proves nothing.
func testLauncher(t testing.TB, opts Options) *Launcher {
	t.Helper()
	cli, err := NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if opts.Image == "" {
		opts.Image = os.Getenv("MCP_EXEC_IMAGE")
	}
	if opts.Instance == "" {
		opts.Instance = "test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
		if len(opts.Instance) > 60 {
			opts.Instance = opts.Instance[:60]
		}
	}
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	l, err := New(cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no engine: %v (run scripts/engine.sh and scripts/images.sh)", err)
		}
		t.Fatalf("engine check: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("closing launcher: %v", err)
		}
		assertNoContainers(t, cli, l.opts.Instance)
	})
	return l
}

func assertNoContainers(t testing.TB, cli *client.Client, instance string) {
	t.Helper()
	f := make(client.Filters).Add("label", LabelInstance+"="+instance)
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	if len(list.Items) != 0 {
		t.Errorf("got %d containers left with instance %q, want 0", len(list.Items), instance)
	}
}

func TestRunHello(t *testing.T) {
	l := testLauncher(t, Options{})
	res, err := l.Run(t.Context(), Job{Code: "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nprint(sys.stdin.read().upper())", Stdin: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
}
