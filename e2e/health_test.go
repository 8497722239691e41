package e2e_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestHealthDuringEngineOutage runs the server against the engine through a socket
// proxy that the test cuts and restores: /healthz stays 200 throughout, /readyz turns
// 503 ("engine unreachable", nothing about the deployment) while the engine is gone and
// 200 again once it is back and the pool has refilled, a call during the outage waits
// for the engine for MCP_EXEC_ENGINE_WAIT_S and then gets a tool error naming the
// engine and the setting, a call whose wait sees the engine back runs, and the server
// neither exits nor leaves a container.
func TestHealthDuringEngineOutage(t *testing.T) {
	const engineWait = 6 * time.Second
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	target := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if !strings.HasPrefix(h, "unix://") {
			t.Fatalf("DOCKER_HOST %q: this test proxies a unix socket", h)
		}
		target = strings.TrimPrefix(h, "unix://")
	}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	px := &sockProxy{path: sock, target: target}
	if err := px.up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.down)

	bin := e2e.Build(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"DOCKER_HOST=unix://" + sock, "MCP_EXEC_POOL_SIZE=1", "MCP_EXEC_ENGINE_WAIT_S=" + strconv.Itoa(int(engineWait/time.Second))}
	if v := os.Getenv("MCP_EXEC_IMAGE"); v != "" {
		env = append(env, "MCP_EXEC_IMAGE="+v)
	}
	s, err := e2e.StartServer(t, bin, env, "http", "test-health", "")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		resp, err := hc.Get(s.Base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	waitFor := func(what, path string, want int, within time.Duration) string {
		t.Helper()
		var code int
		var body string
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if code, body = get(path); code == want {
				return body
			}
		}
		t.Fatalf("%s: %s answered %d %q for %s, want %d", what, path, code, body, within, want)
		return ""
	}

	waitFor("before the outage", "/readyz", 200, 90*time.Second)
	if code, body := get("/healthz"); code != 200 {
		t.Fatalf("/healthz before the outage: %d %q", code, body)
	}

	px.down()
	body := waitFor("engine gone", "/readyz", 503, 30*time.Second)
	if body != "not ready: engine unreachable" {
		t.Errorf("/readyz during the outage: %q, want %q", body, "not ready: engine unreachable")
	}
	for _, leak := range []string{sock, "docker", "unix", "/"} {
		if strings.Contains(body, leak) {
			t.Errorf("/readyz body %q reveals %q", body, leak)
		}
	}
	if code, body := get("/healthz"); code != 200 {
		t.Errorf("/healthz during the outage: %d %q, want 200 (the process is alive)", code, body)
	}

	session := s.Connect(t, nil, nil)
	// A call during the outage waits for the engine up to the bound, then fails
	// with a tool error naming the engine and the bound.
	t0 := time.Now()
	res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "print(1)"}})
	waited := time.Since(t0)
	if err != nil {
		t.Fatalf("call during the outage: %v, want a tool error", err)
	}
	text := toolText(res)
	if !res.IsError || !strings.Contains(text, "engine") || !strings.Contains(text, "MCP_EXEC_ENGINE_WAIT_S") {
		t.Errorf("call during the outage: isError=%v %q, want a tool error naming the engine and MCP_EXEC_ENGINE_WAIT_S", res.IsError, text)
	}
	if waited < engineWait {
		t.Errorf("call during the outage failed after %s, want it to wait the bound of %s first", waited, engineWait)
	}
	t.Logf("call during the outage: failed after %s: %s", waited.Round(time.Millisecond), text)

	// A call that arrives during the outage and sees the engine back within the
	// bound runs.
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	back := make(chan answer, 1)
	go func() {
		res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "print(6*7)"}})
		back <- answer{res, err}
	}()
	time.Sleep(engineWait / 3)
	if err := px.up(); err != nil {
		t.Fatal(err)
	}
	a := <-back
	if a.err != nil || a.res.IsError || !strings.Contains(toolText(a.res), "42") {
		t.Errorf("call waiting through the outage: err %v, result %q", a.err, toolText(a.res))
	}
	waitFor("engine back", "/readyz", 200, 90*time.Second)
	res, err = session.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "print(6*7)"}})
	if err != nil || res.IsError || !strings.Contains(toolText(res), "42") {
		t.Errorf("call after the outage: err %v, result %q", err, toolText(res))
	}
	select {
	case <-s.Done():
		t.Fatalf("the server exited during the test: %v", s.WaitErr())
	default:
	}
	// s.Stop (cleanup) checks that no container of the instance is left.
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// sockProxy forwards a unix socket to another; down closes the listener and cuts
// every connection, as an engine that went away would.
type sockProxy struct {
	path, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func (p *sockProxy) up() error {
	_ = os.Remove(p.path)
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.conns = ln, map[net.Conn]struct{}{}
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return nil
}

func (p *sockProxy) serve(c net.Conn) {
	e, err := net.Dial("unix", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, e) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(e, c)
	go pipe(c, e)
	<-done
	<-done
	c.Close()
	e.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, e)
	p.mu.Unlock()
}

func (p *sockProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *sockProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	_ = p.ln.Close()
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	_ = os.Remove(p.path)
}
