package e2e_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// TestRestartReapsOrphans: a server killed with SIGKILL mid-exec leaves its sandbox
// behind; the next start of the same instance removes it before serving, and leaves
// other instances' containers alone.
func TestRestartReapsOrphans(t *testing.T) {
	bin := e2e.Build(t)
	// Closed after the cleanups registered below, which use it.
	cli := launchertest.Client(t)
	if _, err := cli.Ping(t.Context(), client.PingOptions{}); err != nil {
		e2e.SkipOrFail(t, "no engine: %v", err)
	}
	instance := "test-crash-reap"
	image := os.Getenv("MCP_EXEC_IMAGE")
	if image == "" {
		image = launcher.DefaultImage
	}

	// A container of another instance, which the restart must not touch.
	other, err := cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Cmd: []string{"true"},
			Labels: map[string]string{launcher.LabelRole: "sandbox", launcher.LabelInstance: instance + "-other"}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), other.ID, client.ContainerRemoveOptions{Force: true})
	})

	start := func() *crashServer {
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		if h := os.Getenv("DOCKER_HOST"); h != "" {
			env = append(env, "DOCKER_HOST="+h)
		}
		// No pool of either kind: the one sandbox seen is the call's (the session
		// pool's after SIGKILL: TestSessionExpiryAndRestart).
		return crashStart(t, bin, env, "--instance", instance, "--pool-size", "0", "--session-pool-size", "0", "--log-format", "json", "--image", image)
	}
	be, err := docker.New(cli, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	list := crashList(t, be, instance)

	orphan := crashMidExec(t, start, list, 30*time.Second, 0)
	crashWaitLog(t, start().log, "serving")
	// The restarted server may already run its own start-up sandbox (the limits
	// check); the orphan, though, must be gone before it serves.
	if slices.Contains(list(), orphan) {
		t.Errorf("after restart: the orphan %.12s of %s is still there, want it removed before serving", orphan, instance)
	}
	if _, err := cli.ContainerInspect(t.Context(), other.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("another instance's container: %v, want it untouched", err)
	}
}

// crashServer is the binary serving stdio: its stdin and the lines of its log.
type crashServer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	log *bufio.Scanner
}

// crashStart starts bin with args and env as a stdio server, killed at the end of
// the test.
func crashStart(t *testing.T, bin string, env []string, args ...string) *crashServer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	in, _ := cmd.StdinPipe()
	errs, _ := cmd.StderrPipe()
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &crashServer{cmd: cmd, in: in, log: bufio.NewScanner(errs)}
}

// crashList returns a function that lists the sandboxes of instance on be.
func crashList(t *testing.T, be interface {
	List(ctx context.Context, instance string) ([]string, error)
}, instance string) func() []string {
	return func() []string {
		ids, err := be.List(t.Context(), instance)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
}

// crashWaitLog reads the server's JSON log up to a line with message msg.
func crashWaitLog(t *testing.T, sc *bufio.Scanner, msg string) {
	t.Helper()
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"message":"`+msg) {
			return
		}
	}
	t.Fatalf("server ended before logging %q", msg)
}

// crashWait waits up to within for done, and fails with what otherwise.
func crashWait(t *testing.T, within time.Duration, done func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(within); !done(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s within %s", what, within)
		}
	}
}

// crashMidExec starts a server (start, whose stdin is the MCP session), waits until
// it serves and the start-up limits check's sandbox is gone (so that the one sandbox
// seen below is the call's), calls exec with a program that sleeps, waits up to appear
// for its sandbox (list), lets it run for settle, kills the server with SIGKILL and
// returns the one sandbox left behind: the orphan.
func crashMidExec(t *testing.T, start func() *crashServer, list func() []string, appear, settle time.Duration) string {
	t.Helper()
	s := start()
	crashWaitLog(t, s.log, "serving")
	crashWait(t, 30*time.Second, func() bool { return len(list()) == 0 }, "the limits check's sandbox was not removed")
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"code":"import time; time.sleep(120)"}}}`,
	} {
		io.WriteString(s.in, m+"\n")
	}
	crashWait(t, appear, func() bool { return len(list()) != 0 }, "no sandbox appeared")
	time.Sleep(settle)
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	orphans := list()
	if len(orphans) != 1 {
		t.Fatalf("after SIGKILL: got sandboxes %v, want the 1 orphan", orphans)
	}
	return orphans[0]
}
