package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/mcpserver"
)

// stack is the whole server path a client sees: launcher, MCP server, and an MCP
// client session connected to it over in-memory transports.
type stack struct {
	l   *launcher.Launcher
	eng *timedEngine
	ss  *mcp.ServerSession
	cs  *mcp.ClientSession
	// session, when set, is the session_id call passes: the calls run in a session.
	session string
}

// openSession creates a session through session_create; the calls that follow run in it.
func (s *stack) openSession(ctx context.Context) error {
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_create", Arguments: map[string]any{}})
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("session_create: tool error")
	}
	var out struct {
		ID string `json:"session_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.ID == "" {
		return fmt.Errorf("session_create: no session_id (%v)", err)
	}
	s.session = out.ID
	return nil
}

// closeSession ends session sid through session_close (idempotent: a second close is
// not an error).
func (s *stack) closeSession(ctx context.Context, sid string) {
	s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_close", Arguments: map[string]any{"session_id": sid}})
}

func newStack(ctx context.Context, cli *client.Client, image, runtime string, opts launcher.Options) (*stack, error) {
	return newStackUpstreams(ctx, cli, image, runtime, opts, nil)
}

// newStackUpstreams is newStack in code mode when ups is not nil.
func newStackUpstreams(ctx context.Context, cli *client.Client, image, runtime string, opts launcher.Options, ups mcpserver.Upstreams) (*stack, error) {
	eng := newTimedEngine(cli)
	opts.Image = image
	opts.Runtime = runtime
	opts.Instance = benchLabel
	opts.Logger = zerolog.Nop()
	be, err := docker.New(eng, opts.Logger)
	if err != nil {
		return nil, err
	}
	l, err := launcher.New(be, opts)
	if err != nil {
		return nil, err
	}
	s := &stack{l: l, eng: eng}
	if err := l.Check(ctx); err != nil {
		s.close()
		return nil, err
	}
	l.StartPool() // the bench swept its leftovers at start: nothing to reap first
	st, ct := mcp.NewInMemoryTransports()
	o := mcpserver.Options{Name: "mcp-exec-bench", Upstreams: ups}
	if ups == nil { // the bench measures sessions without code mode
		o.Sessions = mcpserver.SessionOptions{Backend: mcpserver.LauncherSessions{L: l}, Max: 2, Memory: sessionMemory}
	}
	s.ss, err = mcpserver.New(l, o).Connect(ctx, st, nil)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("server connect: %w", err)
	}
	s.cs, err = mcp.NewClient(&mcp.Implementation{Name: "mcp-exec-bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("client connect: %w", err)
	}
	return s, nil
}

// close ends the session and the launcher, waiting until its containers are removed.
func (s *stack) close() error {
	if s.cs != nil {
		s.cs.Close()
	}
	if s.ss != nil {
		s.ss.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return s.l.Close(ctx)
}

// call runs sn through tools/call exec and checks its output. It returns the
// program's duration as the tool reports it (from code delivered to exit, in ms).
func (s *stack) call(ctx context.Context, sn snippet) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := map[string]any{"code": sn.code}
	if s.session != "" {
		args["session_id"] = s.session
	}
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: args})
	if err != nil {
		return 0, err
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				msg = append(msg, t.Text)
			}
		}
		return 0, fmt.Errorf("tool error: %s", strings.Join(msg, "; "))
	}
	var out struct {
		Stdout     string `json:"stdout"`
		Stderr     string `json:"stderr"`
		ExitCode   int    `json:"exit_code"`
		DurationMS int64  `json:"duration_ms"`
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return 0, fmt.Errorf("decoding structured result: %w", err)
	}
	if out.ExitCode != 0 || out.Stdout != sn.want {
		return 0, fmt.Errorf("%s: exit %d, stdout %q, stderr %q", sn.name, out.ExitCode, out.Stdout, tail(out.Stderr, 300))
	}
	return time.Duration(out.DurationMS) * time.Millisecond, nil
}

// waitFull waits until the warm pool holds PoolSize ready sandboxes.
func (s *stack) waitFull(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := s.l.PoolStats()
		if st.Idle >= st.Size {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm pool not full after 2 minutes (%d/%d idle, last refill error: %v)", st.Idle, st.Size, st.LastErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

var errSkipped = errors.New("skipped")
