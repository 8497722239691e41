package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/mcpserver"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

type putIn struct {
	Key   string `json:"key" jsonschema:"the key"`
	Value string `json:"value" jsonschema:"the value"`
}
type getIn struct {
	Key string `json:"key" jsonschema:"the key"`
}
type hugeIn struct {
	Bytes int `json:"bytes" jsonschema:"how many bytes"`
}

// statefulUpstream is an MCP server that keeps values per session, as a stateful
// upstream does (a shopping cart, a patient's record opened by an earlier call): put
// stores, get reads what this session stored. huge returns that many bytes; sleep
// waits.
func statefulUpstream() *mcp.Server {
	var mu sync.Mutex
	kept := map[*mcp.ServerSession]map[string]string{}
	s := mcp.NewServer(&mcp.Implementation{Name: "stateful-upstream", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "put", Description: "Store a value in this session."}, func(ctx context.Context, req *mcp.CallToolRequest, in putIn) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		defer mu.Unlock()
		if kept[req.Session] == nil {
			kept[req.Session] = map[string]string{}
		}
		kept[req.Session][in.Key] = in.Value
		return text("stored"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "get", Description: "Read a value this session stored."}, func(ctx context.Context, req *mcp.CallToolRequest, in getIn) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := kept[req.Session][in.Key]
		if !ok {
			return text("(nothing)"), nil, nil
		}
		return text(v), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "huge", Description: "Return that many bytes."}, func(ctx context.Context, req *mcp.CallToolRequest, in hugeIn) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", in.Bytes)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep ms milliseconds."}, func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
			return text("slept"), nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	return s
}

// serveStateful serves statefulUpstream over streamable HTTP on 127.0.0.1 (one server
// for every session, as a real one), answering with JSON bodies or SSE streams.
func serveStateful(t *testing.T, jsonResponse bool) string {
	t.Helper()
	s := statefulUpstream()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}))
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			ss.Close()
		}
		hs.Close()
	})
	return hs.URL
}

// startWire starts a Manager over the stateful upstream as "local" (stdio) and
// "remote" (HTTP, SSE answers) and "remote_json" (HTTP, JSON answers); with shared,
// each is "shared": true. set changes the configuration before the start.
func startWire(t *testing.T, shared bool, limits string, set func(*upstream.Config)) (*upstream.Manager, *launchertest.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file := fmt.Sprintf(`{"mcpServers": {
  "local": {"command": %q, "args": ["-test.run=^$"], "env": {"MCP_EXEC_TEST_UPSTREAM": "stateful"}, "tools": ["*"], "shared": %v},
  "remote": {"url": %q, "tools": ["*"], "shared": %v},
  "remote_json": {"url": %q, "tools": ["*"], "shared": %v}
 }%s}`, exe, shared, serveStateful(t, false), shared, serveStateful(t, true), shared, limits)
	cfg, err := upstream.Parse([]byte(file), upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(cfg)
	}
	logs := &launchertest.Buffer{}
	m := upstream.New(cfg, "test", zerolog.New(logs))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		time.Sleep(100 * time.Millisecond) // the sessions' children see their stdin close
	})
	m.Start(ctx, 20*time.Second)
	for _, st := range m.Status() {
		if !st.Connected {
			t.Fatalf("upstream %s not connected: %s", st.Name, st.Error)
		}
	}
	return m, logs
}

// reply is what the bridge answers a program's call.
type reply struct {
	Result *mcp.CallToolResult `json:"result"`
	Error  *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}

// callAs makes one call as a program run by identity would.
func callAs(t *testing.T, m *upstream.Manager, identity, server, tool string, args any) reply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"server": server, "tool": tool, "arguments": args})
	ctx := upstream.WithIdentity(t.Context(), identity)
	var r reply
	if err := json.Unmarshal(m.NewExec(nil).Tools().Serve(ctx, body, len(body)), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// textOf is the reply's text, or its error as "kind: message".
func textOf(r reply) string {
	if r.Error != nil {
		return r.Error.Kind + ": " + r.Error.Message
	}
	if r.Result == nil || len(r.Result.Content) == 0 {
		return "(no content)"
	}
	return r.Result.Content[0].(*mcp.TextContent).Text
}

// TestUpstreamSessionsPerIdentity: what one identity stores in a stateful upstream,
// over stdio and HTTP, another cannot read back by default; with "shared": true it
// can (the operator's choice).
func TestUpstreamSessionsPerIdentity(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			m, _ := startWire(t, shared, "", nil)
			for _, server := range []string{"local", "remote", "remote_json"} {
				const alice, bob = "oauth https://issuer alice", "oauth https://issuer bob"
				if got := textOf(callAs(t, m, alice, server, "put", map[string]string{"key": "patient", "value": "record 4711"})); got != "stored" {
					t.Fatalf("%s: alice's put: %s", server, got)
				}
				want := "(nothing)"
				if shared {
					want = "record 4711"
				}
				if got := textOf(callAs(t, m, bob, server, "get", map[string]string{"key": "patient"})); got != want {
					t.Errorf("%s: bob's get: got %q, want %q", server, got, want)
				}
				if got := textOf(callAs(t, m, alice, server, "get", map[string]string{"key": "patient"})); got != "record 4711" {
					t.Errorf("%s: alice's get: got %q, want her record", server, got)
				}
			}
			want := 2
			if shared {
				want = 0
			}
			for _, st := range m.Status() {
				if st.Sessions != want {
					t.Errorf("%s: %d callers' sessions, want %d", st.Name, st.Sessions, want)
				}
			}
		})
	}
}

// testVars spells settings as cmd/mcp-exec's table does: MCP_EXEC_ and the flag.
func testVars(s backend.Setting) string {
	return "MCP_EXEC_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

// TestUpstreamSessionsBounded: past --upstream-max-sessions a further identity's call
// fails as unavailable, naming the flag; a session idle for the idle timeout closes
// (what it kept is gone) and frees its place.
func TestUpstreamSessionsBounded(t *testing.T) {
	m, _ := startWire(t, false, "", func(c *upstream.Config) {
		c.MaxSessions, c.IdleTimeout, c.Vars = 1, 500*time.Millisecond, testVars
	})
	const alice, bob = "oauth a", "oauth b"
	for _, server := range []string{"local", "remote"} {
		if got := textOf(callAs(t, m, alice, server, "put", map[string]string{"key": "k", "value": "v"})); got != "stored" {
			t.Fatalf("%s: alice's put: %s", server, got)
		}
		got := textOf(callAs(t, m, bob, server, "get", map[string]string{"key": "k"}))
		if !strings.HasPrefix(got, "unavailable: ") || !strings.Contains(got, "--upstream-max-sessions") || !strings.Contains(got, "MCP_EXEC_UPSTREAM_MAX_SESSIONS") {
			t.Errorf("%s: bob's call past the bound: got %q, want unavailable naming the flag", server, got)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Status()[0].Sessions+m.Status()[1].Sessions > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("idle sessions not closed: %+v", m.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, server := range []string{"local", "remote"} {
		if got := textOf(callAs(t, m, bob, server, "get", map[string]string{"key": "k"})); got != "(nothing)" {
			t.Errorf("%s: bob's call after alice's session closed: got %q", server, got)
		}
	}
}

// TestUpstreamResultTooLarge: a 40 MB answer, over stdio, HTTP with an SSE stream
// and HTTP with a JSON body, is discarded as it is read: the caller gets too_large
// naming the server, the limit and its key; a call of another caller in flight on
// the same session and the next one succeed, the session never reconnected. Over
// stdio the server allocates a small part of the answer (the upstream is another
// process, so all it allocates is the server's own).
func TestUpstreamResultTooLarge(t *testing.T) {
	m, logs := startWire(t, true, `, "limits": {"max_result_bytes": 1048576, "call_timeout_s": 120}`, nil)
	const huge = 20 << 20
	for _, server := range []string{"local", "remote", "remote_json"} {
		t.Run(server, func(t *testing.T) {
			slept := make(chan string, 1)
			go func() {
				time.Sleep(100 * time.Millisecond) // after alice's call, in flight while the upstream writes its answer
				slept <- textOf(callAs(t, m, "oauth bob", server, "sleep", map[string]int{"ms": 2000}))
			}()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got := textOf(callAs(t, m, "oauth alice", server, "huge", map[string]int{"bytes": huge}))
			runtime.ReadMemStats(&after)
			for _, want := range []string{"too_large: " + server + ".huge: upstream \"" + server + "\" answered with ", "more than the 1114112 one answer may have (limits.max_result_bytes in the upstreams file"} {
				if !strings.Contains(got, want) {
					t.Errorf("alice's huge call: got %q, want it to contain %q", got, want)
				}
			}
			if server == "local" {
				if !strings.Contains(got, fmt.Sprintf("with %d bytes", huge+67)) && !strings.Contains(got, "bytes, more than") {
					t.Errorf("alice's huge call: got %q, want the answer's size", got)
				}
				if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
					t.Errorf("the server allocated %d bytes while reading a %d-byte answer, want under 16 MiB", n, huge)
				}
			}
			if s := <-slept; s != "slept" {
				t.Errorf("bob's call in flight: got %q, want slept", s)
			}
			if got := textOf(callAs(t, m, "oauth carol", server, "get", map[string]string{"key": "x"})); got != "(nothing)" {
				t.Errorf("carol's next call: got %q", got)
			}
		})
	}
	if n := strings.Count(logs.String(), "upstream connected"); n != 3 {
		t.Errorf("%d connections, want 3 (none again):\n%s", n, logs.String())
	}
}

// TestCodeModeSessionsPerIdentity: end to end, from Python in the sandbox, over the
// server's HTTP with two OAuth identities: what alice's program stores in a stateful
// upstream bob's program cannot read back; with "shared": true it can.
func TestCodeModeSessionsPerIdentity(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			logs := &launchertest.Buffer{}
			l := launchertest.New(t, launcher.Options{MaxConcurrent: 2, Logger: zerolog.New(logs)})
			m, _ := startWire(t, shared, "", nil)
			srv := mcpserver.New(l, mcpserver.Options{Upstreams: m, Logger: zerolog.New(logs)})
			verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
				return &auth.TokenInfo{UserID: "https://issuer " + tok, Expiration: time.Now().Add(time.Hour)}, nil
			}
			hs := httptest.NewServer(auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
			t.Cleanup(hs.Close)
			run := func(tok, code string) string {
				t.Helper()
				hc := &http.Client{Transport: bearer{tok}}
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
					Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc, MaxRetries: -1}, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": code}})
				if err != nil {
					t.Fatal(err)
				}
				var out execResult
				b, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(b, &out); err != nil || res.IsError {
					t.Fatalf("exec: %v %+v", err, res.Content)
				}
				return out.Stdout + out.Stderr
			}
			if got := run("alice", "from mcptools import local, remote\nprint(local.put(key='patient', value='record 4711'), remote.put(key='patient', value='record 4711'))\n"); got != "stored stored\n" {
				t.Fatalf("alice's program: %q", got)
			}
			want := "(nothing) (nothing)\n"
			if shared {
				want = "record 4711 record 4711\n"
			}
			if got := run("bob", "from mcptools import local, remote\nprint(local.get(key='patient'), remote.get(key='patient'))\n"); got != want {
				t.Errorf("bob's program: got %q, want %q", got, want)
			}
		})
	}
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}
