package main

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

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

// TestRestartReapsOrphans: a server killed with SIGKILL mid-exec leaves its sandbox
// behind; the next start of the same instance removes it before serving, and leaves
// other instances' containers alone.
func TestRestartReapsOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	cli, err := engine.NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Ping(t.Context(), client.PingOptions{}); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no engine: %v", err)
		}
		t.Fatalf("no engine: %v", err)
	}
	bin := e2eBuild(t)
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

	start := func() (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
		cmd := exec.Command(bin, "--instance", instance, "--pool-size", "0", "--log-format", "json", "--image", image)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		if h := os.Getenv("DOCKER_HOST"); h != "" {
			cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
		}
		in, _ := cmd.StdinPipe()
		errs, _ := cmd.StderrPipe()
		cmd.Stdout = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, in, bufio.NewScanner(errs)
	}
	waitLog := func(sc *bufio.Scanner, msg string) {
		t.Helper()
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"message":"`+msg) {
				return
			}
		}
		t.Fatalf("server ended before logging %q", msg)
	}
	list := func() []string {
		f := make(client.Filters).Add("label", launcher.LabelInstance+"="+instance)
		list, err := cli.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range list.Items {
			ids = append(ids, c.ID)
		}
		return ids
	}

	cmd, in, logs := start()
	waitLog(logs, "serving")
	// The start-up limits check's sandbox is removed in the background and may still
	// be there: wait for it, so that the one sandbox seen below is the call's.
	for deadline := time.Now().Add(30 * time.Second); len(list()) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the limits check's sandbox was not removed within 30s")
		}
	}
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"code":"import time; time.sleep(120)"}}}`,
	} {
		io.WriteString(in, m+"\n")
	}
	for deadline := time.Now().Add(30 * time.Second); len(list()) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no sandbox appeared")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	orphans := list()
	if len(orphans) != 1 {
		t.Fatalf("after SIGKILL: got %d containers, want the 1 orphan", len(orphans))
	}

	_, _, logs = start()
	waitLog(logs, "serving")
	// The restarted server may already run its own start-up sandbox (the limits
	// check); the orphan, though, must be gone before it serves.
	if slices.Contains(list(), orphans[0]) {
		t.Errorf("after restart: the orphan %.12s of %s is still there, want it removed before serving", orphans[0], instance)
	}
	if _, err := cli.ContainerInspect(t.Context(), other.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("another instance's container: %v, want it untouched", err)
	}
}
