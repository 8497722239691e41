package e2e_test

// Protocol revisions, end to end: the Go SDK's own client, speaking the
// stateless revision 2026-07-28 and the older 2025-11-25 and 2025-06-18, runs
// the tool contract against the real binary over stdio and streamable HTTP
// (with the static token as Authorization: Bearer), and, with 2026-07-28,
// against two replicas in their default (not --stateless) mode behind nginx
// with no affinity. A raw 2026-07-28 tools/call without any initialize is
// answered too. Skipped with -short; outside CI a missing engine skips.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

const protoMaxOutput = 64 << 10

var protoRevisions = []string{"2026-07-28", "2025-11-25", "2025-06-18"}

// bearerTransport adds Authorization: Bearer to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// protoSetup builds the binary and returns it with the servers' environment.
func protoSetup(t *testing.T, extra ...string) (bin string, env []string) {
	t.Helper()
	bin = e2e.Build(t)
	env = e2e.Env(append([]string{"MCP_EXEC_MAX_OUTPUT_BYTES=" + strconv.Itoa(protoMaxOutput), "MCP_EXEC_LOG_FORMAT=json"}, extra...)...)
	return bin, env
}

// protoConnect connects a Go SDK client asking for revision rev, and checks
// that rev is what was negotiated (a silent fall-back would prove nothing).
func protoConnect(t *testing.T, tr mcp.Transport, rev string, onProgress func(*mcp.ProgressNotificationParams)) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "proto-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if onProgress != nil {
				onProgress(req.Params)
			}
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), e2e.StartTimeout)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connecting with %s: %v", rev, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != rev {
		t.Fatalf("negotiated protocol %s, want %s", got, rev)
	}
	if si := cs.InitializeResult().ServerInfo; si == nil || si.Name != "mcp-exec" {
		t.Errorf("server info %+v, want mcp-exec", si)
	}
	return cs
}

// protoResult is the structured result of exec.
type protoResult struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	TimedOut bool   `json:"timed_out"`
	Trunc    bool   `json:"truncated"`
	Files    []struct {
		Name     string `json:"name"`
		Returned bool   `json:"returned"`
	} `json:"files"`
}

func protoCall(t *testing.T, cs *mcp.ClientSession, args map[string]any, progressToken any) (*mcp.CallToolResult, protoResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := &mcp.CallToolParams{Name: "exec", Arguments: args}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("calling exec: %v", err)
	}
	var r protoResult
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("structured content %s: %v", b, err)
		}
	}
	return res, r
}

// protoContract runs the tool contract through cs.
func protoContract(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	check := func(name string, ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: "+format, append([]any{name}, args...)...)
		}
	}
	tools, err := cs.ListTools(t.Context(), nil)
	var names []string
	var exec *mcp.Tool
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "exec" {
			exec = tl
		}
	}
	if !e2e.DefaultTools(names) || exec == nil || exec.OutputSchema == nil {
		t.Fatalf("tools/list: %v; want exec with an output schema (and the session tools where there are sessions)", names)
	}

	res, r := protoCall(t, cs, map[string]any{"code": "print(6*7)"}, nil)
	check("hello", !res.IsError && r.Stdout == "42\n" && r.ExitCode == 0, "isError %t, %+v", res.IsError, r)

	res, r = protoCall(t, cs, map[string]any{"code": "import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)"}, nil)
	check("non-zero exit", !res.IsError && r.ExitCode == 3 && r.Stderr == "bye\n", "isError %t, %+v", res.IsError, r)

	res, r = protoCall(t, cs, map[string]any{"code": "import time\nprint('start', flush=True)\ntime.sleep(60)", "timeout_s": 1}, nil)
	check("timeout", !res.IsError && r.TimedOut && r.ExitCode == 137 && r.Stdout == "start\n", "isError %t, %+v", res.IsError, r)

	res, r = protoCall(t, cs, map[string]any{"code": "print('x' * 200000)"}, nil)
	check("truncation", !res.IsError && r.Trunc && len(r.Stdout) == protoMaxOutput, "isError %t, truncated %t, %d bytes of stdout", res.IsError, r.Trunc, len(r.Stdout))

	res, r = protoCall(t, cs, map[string]any{"code": "import sys\nprint(sys.stdin.read()[::-1])", "stdin": "gnip"}, nil)
	check("stdin", !res.IsError && r.Stdout == "ping\n", "isError %t, %+v", res.IsError, r)

	res, r = protoCall(t, cs, map[string]any{
		"code":  "open('outputs/out.txt', 'w').write(open('in/data.txt').read().upper())",
		"files": []map[string]any{{"name": "in/data.txt", "content": "abc"}},
	}, nil)
	var text string
	for _, c := range res.Content {
		if er, ok := c.(*mcp.EmbeddedResource); ok && er.Resource != nil {
			text = er.Resource.Text
		}
	}
	check("files", !res.IsError && len(r.Files) == 1 && r.Files[0].Name == "out.txt" && r.Files[0].Returned && text == "ABC",
		"isError %t, %+v, resource text %q", res.IsError, r, text)

	res, _ = protoCall(t, cs, map[string]any{"code": "  "}, nil)
	check("bad input", res.IsError, "empty code: isError false, want a tool error")
}

func TestProtocolRevisions(t *testing.T) {
	bin, env := protoSetup(t)
	suffix := strconv.Itoa(os.Getpid())
	token := e2e.Random()
	srv := e2e.Serve(t, bin, env, "http", "proto-http-"+suffix, token)
	hc := &http.Client{Transport: bearerTransport{token, http.DefaultTransport}}

	for _, rev := range protoRevisions {
		t.Run("stdio/"+rev, func(t *testing.T) {
			instance := "proto-stdio-" + suffix
			cmd := exec.Command(bin)
			cmd.Env = append(append([]string{}, env...), "MCP_EXEC_INSTANCE="+instance, "MCP_EXEC_LOG_LEVEL=warn")
			cmd.Stderr = io.Discard
			cs := protoConnect(t, &mcp.CommandTransport{Command: cmd}, rev, nil)
			protoContract(t, cs)
			cs.Close()
			e2e.AssertNoContainers(t, instance)
		})
		t.Run("http/"+rev, func(t *testing.T) {
			var mu sync.Mutex
			var progress []float64
			cs := protoConnect(t, &mcp.StreamableClientTransport{Endpoint: srv.Endpoint, HTTPClient: hc}, rev,
				func(p *mcp.ProgressNotificationParams) {
					mu.Lock()
					progress = append(progress, p.Progress)
					mu.Unlock()
				})
			protoContract(t, cs)
			// Progress reaches the client on every revision (for 2026-07-28 on the
			// call's own response stream, as there is no session stream).
			res, r := protoCall(t, cs, map[string]any{"code": "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(1)"}, "p-"+rev)
			mu.Lock()
			got := append([]float64{}, progress...)
			mu.Unlock()
			if res.IsError || r.Stdout != "0\n1\n2\n" || len(got) < 2 {
				t.Errorf("a 3 s run with a progress token: isError %t, %+v, progress %v; want 2 or more notifications", res.IsError, r, got)
			}
		})
	}

	// The stateless revision needs no initialize: a bare tools/call is answered.
	t.Run("raw 2026-07-28 call without initialize", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"code":"print(1+1)"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.Endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call") // SEP-2243: the method and tool name as headers too
		req.Header.Set("Mcp-Name", "exec")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"stdout":"2\n"`)) {
			t.Errorf("HTTP %d, session %q, body:\n%s\nwant 200 and stdout 2", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), b)
		}
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			t.Errorf("a 2026-07-28 call opened session %q, want none", sid)
		}
	})
}

// TestProtocolStatelessBehindBalancer: two replicas in their default mode (the
// stateless revision needs no --stateless), nginx round-robin with no
// affinity, and one 2026-07-28 Go client making calls through it: every
// result is right and both replicas ran execs.
func TestProtocolStatelessBehindBalancer(t *testing.T) {
	bin, env := protoSetup(t)
	nginx := lbFindNginx(t)
	suffix := strconv.Itoa(os.Getpid())
	token := e2e.Random()
	var replicas []*e2e.Server
	for i := range 2 {
		replicas = append(replicas, e2e.Serve(t, bin, env, "http", fmt.Sprintf("proto-lb-%d-%s", i, suffix), token))
	}
	lb := lbStartNginx(t, nginx, replicas)
	var upstreams sync.Map // replica address -> *atomic.Int64 of tools/call answers
	hc := &http.Client{Transport: upstreamCounter{bearerTransport{token, http.DefaultTransport}, &upstreams}}
	cs := protoConnect(t, &mcp.StreamableClientTransport{Endpoint: lb + "/mcp", HTTPClient: hc}, "2026-07-28", nil)
	protoContract(t, cs)
	const calls = 12
	for i := range calls {
		res, r := protoCall(t, cs, map[string]any{"code": fmt.Sprintf("print(%d*%d)", i, i)}, nil)
		if res.IsError || r.Stdout != fmt.Sprintf("%d\n", i*i) {
			t.Errorf("call %d: isError %t, %+v", i, res.IsError, r)
		}
	}
	for _, s := range replicas {
		n := lbCountExecLogs(t, s)
		t.Logf("replica %s ran %d execs", s.Instance, n)
		if n == 0 {
			t.Errorf("replica %s ran no exec: the balancer did not spread the calls", s.Instance)
		}
	}
	upstreams.Range(func(k, v any) bool {
		t.Logf("responses from %v: %d", k, v.(*atomic.Int64).Load())
		return true
	})
}

// upstreamCounter counts responses by nginx's X-Upstream header.
type upstreamCounter struct {
	base http.RoundTripper
	m    *sync.Map
}

func (u upstreamCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.base.RoundTrip(r)
	if err == nil {
		v, _ := u.m.LoadOrStore(resp.Header.Get("X-Upstream"), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	return resp, err
}
