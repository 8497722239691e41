package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

// TestTwoServersShareAnEngine: servers that share an engine and an instance name (what
// two stdio servers started with the defaults on one workstation have: the host name)
// never remove each other's sandboxes, whichever starts or stops while the other runs
// a program; what one killed with SIGKILL left is gone once the next one serves.
func TestTwoServersShareAnEngine(t *testing.T) {
	bin := e2e.Build(t)
	cli := launchertest.Client(t)
	if _, err := cli.Ping(t.Context(), client.PingOptions{}); err != nil {
		e2e.SkipOrFail(t, "no engine: %v", err)
	}
	be, err := docker.New(cli, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			instance := "test-two-" + transport + "-" + e2e.Random()[:8]
			list := crashList(t, be, instance)
			t.Cleanup(func() { // whatever a failed run left
				ids, _ := be.List(context.Background(), instance)
				for _, id := range ids {
					_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
				}
			})
			start := func(name string) *twoServer { return twoStart(t, bin, transport, instance, name) }

			a := start("A")
			slow := a.call("import time\ntime.sleep(8)\nprint('A done')")
			time.Sleep(2 * time.Second) // A's program runs
			b := start("B")             // B's start-up reaper has run: it serves
			twoWant(t, "B while A runs", b.call("print('B')"), "B\n")
			b.term(t) // B's shutdown sweep, while A's program still runs
			twoWant(t, "A across B's start and stop", slow, "A done\n")
			twoWant(t, "A after B stopped", a.call("print('A again')"), "A again\n")

			c := start("C")
			slow = c.call("import time\ntime.sleep(6)\nprint('C done')")
			time.Sleep(2 * time.Second)
			a.term(t)
			twoWant(t, "C across A's stop", slow, "C done\n")

			// C dies with a program running and its warm pool started: the next
			// server removes all of it before it serves.
			c.call("import time\ntime.sleep(60)")
			time.Sleep(2 * time.Second)
			left := list()
			if len(left) == 0 {
				t.Fatal("no sandbox of C's before its SIGKILL, want its run's and its pool's")
			}
			c.kill()
			d := start("D")
			for _, id := range list() {
				if slices.Contains(left, id) {
					t.Errorf("sandbox %.12s of the SIGKILLed server still there once the next one serves, want it removed", id)
				}
			}
			twoWant(t, "D", d.call("print('D')"), "D\n")
			d.term(t)
			if ids := list(); len(ids) != 0 {
				t.Errorf("%d sandboxes of %s left after every server stopped, want 0", len(ids), instance)
			}
		})
	}
}

// twoServer is one server of TestTwoServersShareAnEngine and its client session.
type twoServer struct {
	name, transport string
	cmd             *exec.Cmd
	cs              *mcp.ClientSession
	logs            *syncbuf.Buffer
	done            chan struct{}
}

// twoResult is a call's structured result, or what went wrong.
type twoResult struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	err      error
}

// twoStart starts bin serving transport with the defaults but the instance name (and
// no egress), and connects a client to it.
func twoStart(t *testing.T, bin, transport, instance, name string) *twoServer {
	t.Helper()
	s := &twoServer{name: name, transport: transport, logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--instance", instance)
	s.cmd.Env = e2e.Env("MCP_EXEC_TRANSPORT=" + transport)
	s.cmd.Stderr = s.logs
	var tr mcp.Transport = &mcp.CommandTransport{Command: s.cmd}
	if transport == "http" {
		port, err := e2e.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.cmd.Env = append(s.cmd.Env, "MCP_EXEC_ADDR=127.0.0.1:"+strconv.Itoa(port))
		s.cmd.Stdout = s.logs
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = s.cmd.Wait(); close(s.done) }()
		crashWait(t, e2e.StartTimeout, func() bool {
			resp, err := http.Get(base + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, "server "+name+" answering /healthz")
		tr = &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}
	}
	t.Cleanup(func() {
		if s.cmd.Process != nil {
			_ = s.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("log of server %s:\n%s", name, s.logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), e2e.StartTimeout)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "two-servers", Version: "0"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connecting to server %s: %v\n%s", name, err, s.logs.String())
	}
	s.cs = cs
	// The first answer comes after the start-up reaper and the limits check.
	twoWant(t, "server "+name+" ready", s.call("print('ready')"), "ready\n")
	return s
}

// call calls exec with code, in the background.
func (s *twoServer) call(code string) <-chan twoResult {
	out := make(chan twoResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": code}})
		var r twoResult
		switch {
		case err != nil:
			r.err = err
		case res.IsError:
			r.err = fmt.Errorf("tool error: %v", res.Content)
		default:
			raw, _ := json.Marshal(res.StructuredContent)
			r.err = json.Unmarshal(raw, &r)
		}
		out <- r
	}()
	return out
}

// term stops the server: SIGTERM over HTTP; over stdio its client closes stdin, which
// ends a stdio server, and waits for it.
func (s *twoServer) term(t *testing.T) {
	t.Helper()
	if s.transport == "stdio" { // the client's transport owns the process
		if err := s.cs.Close(); err != nil {
			t.Errorf("closing server %s: %v", s.name, err)
		}
		return
	}
	s.cs.Close()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(e2e.StopTimeout):
		t.Errorf("server %s still running %s after SIGTERM", s.name, e2e.StopTimeout)
	}
}

// kill ends the server with SIGKILL.
func (s *twoServer) kill() {
	_ = s.cmd.Process.Kill()
	s.cs.Close()
}

// twoWant waits for a call's result and checks its stdout and exit status.
func twoWant(t *testing.T, what string, c <-chan twoResult, stdout string) {
	t.Helper()
	r := <-c
	if r.err != nil || r.Stdout != stdout || r.ExitCode != 0 {
		t.Errorf("%s: got stdout %q, stderr %q, exit %d, err %v; want stdout %q, exit 0", what, r.Stdout, r.Stderr, r.ExitCode, r.err, stdout)
	}
}
