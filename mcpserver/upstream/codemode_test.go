package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/mcpserver"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// The canary is sent as an argument and comes back in results: it must never be in
// the server's logs.
const canary = "CANARY-7f3a9c"

// TestMain serves the test upstream over stdio when the test binary is re-executed as
// an upstream (MCP_EXEC_TEST_UPSTREAM=stdio).
func TestMain(m *testing.M) {
	if up := map[string]func() *mcp.Server{"stdio": func() *mcp.Server { return testUpstream(nil) }, "stateful": statefulUpstream}[os.Getenv("MCP_EXEC_TEST_UPSTREAM")]; up != nil {
		err := up().Run(context.Background(), &mcp.StdioTransport{})
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// recorder notes what the HTTP upstream saw.
type recorder struct {
	mu       sync.Mutex
	canceled int
	auth     string
	sent     int
	sentArgs string // the raw arguments of the last send
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text"`
}
type sleepIn struct {
	MS int `json:"ms" jsonschema:"milliseconds"`
}
type none struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// testUpstream is an MCP server with tools that echo, return 2 MB, sleep (recording
// their cancellation), fail, return structured content and an image, die, and one
// ("hidden") that no allowlist names.
func testUpstream(rec *recorder) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		if rec != nil {
			rec.mu.Lock()
			rec.auth = req.Extra.Header.Get("Authorization")
			rec.mu.Unlock()
		}
		return text(in.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Return 2 MB of text."}, func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", 2<<20)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep ms milliseconds."}, func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
			return text("slept"), nil, nil
		case <-ctx.Done():
			if rec != nil {
				rec.mu.Lock()
				rec.canceled++
				rec.mu.Unlock()
			}
			return nil, nil, ctx.Err()
		}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fail with isError."}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed: " + in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "structured", Description: "Return structured content."}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, map[string]any, error) {
		return nil, map[string]any{"n": 42, "text": in.Text}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "Return an image."}, func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("\x89PNG fake"), MIMEType: "image/png"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "die", Description: "End the upstream's process mid-call (stdio)."}, func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		if rec == nil {
			os.Exit(3)
		}
		return text("not over stdio"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "send", Description: "Send the text out (needs approval)."}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		if rec != nil {
			rec.mu.Lock()
			rec.sent++
			rec.sentArgs = string(req.Params.Arguments)
			rec.mu.Unlock()
		}
		return text("sent"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hidden", Description: "Not allowed."}, func(ctx context.Context, req *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		return text("must not be reached"), nil, nil
	})
	return s
}

// harness is a server in code mode over a real launcher, with a stdio upstream
// ("local", the test binary) and an HTTP one ("remote", httptest on 127.0.0.1).
type harness struct {
	cs   *mcp.ClientSession
	rec  *recorder
	m    *upstream.Manager
	logs *launchertest.Buffer
}

func newHarness(t *testing.T, limits string) *harness {
	t.Helper()
	return newHarnessClient(t, limits, nil, "")
}

// newHarnessClient is newHarness with the client's options (its elicitation handler)
// and protocol version ("" is the latest).
// The launcher comes first, so that its end-of-test check sees every goroutine the
// harness started end: the cleanups registered after it run before it.
func newHarnessClient(t *testing.T, limits string, copts *mcp.ClientOptions, protocol string) *harness {
	t.Helper()
	h := &harness{rec: &recorder{}, logs: &launchertest.Buffer{}}
	log := zerolog.New(h.logs).Level(zerolog.DebugLevel)
	l := launchertest.New(t, launcher.Options{MaxConcurrent: 4, Logger: log})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var servers []*mcp.Server
	hs := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := testUpstream(h.rec)
		mu.Lock()
		servers = append(servers, s)
		mu.Unlock()
		return s
	}, nil))
	hs.Listener = ln
	hs.Start()
	t.Cleanup(func() { // the upstream's sessions end with the test's
		mu.Lock()
		all := servers
		mu.Unlock()
		for _, s := range all {
			for ss := range s.Sessions() {
				ss.Close()
			}
		}
		hs.Close()
	})

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_UPSTREAM_TOKEN", "Bearer s3cret-token")
	file := fmt.Sprintf(`{"mcpServers": {
  "local": {"command": %q, "args": ["-test.run=^$"], "env": {"MCP_EXEC_TEST_UPSTREAM": "stdio"},
            "tools": ["echo", "fail", "structured", "image", "die", "big"]},
  "remote": {"url": %q, "headers": {"Authorization": "${env:TEST_UPSTREAM_TOKEN}"}, "tools": ["echo", "sleep", "s*"],
             "approve": ["send"]}
 }%s}`, exe, hs.URL, limits)
	cfg, err := upstream.Parse([]byte(file), upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.m = upstream.New(cfg, "test", log)
	upstream.SetBackoff(h.m, 100*time.Millisecond, time.Second)
	h.m.Start(ctx, 20*time.Second)
	for _, st := range h.m.Status() {
		if !st.Connected {
			t.Fatalf("upstream %s not connected: %s", st.Name, st.Error)
		}
	}

	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(l, mcpserver.Options{Upstreams: h.m, Logger: log}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.cs, err = mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, copts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.cs.Close()
		ss.Wait()
		if strings.Contains(h.logs.String(), canary) || strings.Contains(h.logs.String(), "s3cret") {
			t.Errorf("the logs carry a canary or a secret:\n%s", h.logs.String())
		}
	})
	return h
}

type execResult struct {
	Stdout    string                `json:"stdout"`
	Stderr    string                `json:"stderr"`
	ExitCode  int                   `json:"exit_code"`
	TimedOut  bool                  `json:"timed_out"`
	ToolCalls []upstream.CallRecord `json:"tool_calls"`
	More      []upstream.CallGroup  `json:"tool_calls_more"`
}

func (h *harness) exec(t *testing.T, code string, timeout int) execResult {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"code": code, "timeout_s": timeout})
	res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("exec: tool error %v", res.Content[0].(*mcp.TextContent).Text)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out execResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func statuses(calls []upstream.CallRecord) string {
	var s []string
	for _, c := range calls {
		s = append(s, c.Server+"."+c.Tool+":"+c.Status)
	}
	return strings.Join(s, " ")
}

// TestCodeMode: from Python, over stdio and HTTP: results of every shape, isError as
// ToolError, a tool outside the allowlist denied (never reaching the upstream),
// oversized arguments refused, the budget spent (every call counts), a header
// secret resolved, and tool_calls metadata in the result with nothing of the
// arguments in the logs.
func TestCodeMode(t *testing.T) {
	h := newHarness(t, `, "limits": {"max_calls": 9, "max_arg_bytes": 10000}`)
	code := `import mcptools
from mcptools import local, remote
print(local.echo(text="` + canary + `"))
print(remote.echo(text="over http"))
print(local.structured(text="s"))
img = local.image()
print(type(img).__name__, img.mime_type, img.data)
print(len(local.big()))
try:
    local.fail(text="` + canary + `")
except mcptools.ToolError as e:
    print("ToolError:", type(e).__name__, str(e) == "it failed: ` + canary + `")
try:
    mcptools._call("remote", "hidden", {})
except mcptools.ToolDenied as e:
    print("denied:", e)
try:
    local.echo(text="y" * 20000)
except mcptools.ToolBudgetExceeded as e:
    print("too large:", e)
print(remote.sleep(ms=1))
try:
    print(remote.sleep(ms=1))
except mcptools.ToolBudgetExceeded as e:
    print("budget:", e)
print(mcptools.search("structured"))
`
	out := h.exec(t, code, 60)
	for _, want := range []string{
		canary + "\n", "over http\n", "{'n': 42, 'text': 's'}\n", "Image image/png b'\\x89PNG fake'\n", "2097152\n",
		"ToolError: ToolError True\n", "denied: remote.hidden is not an allowed tool",
		"too large: the call is 20062 bytes; the limit is 10000 bytes of arguments", "slept\n", "budget: this run has made its 9 calls",
		"local.structured(*, text)",
	} {
		if !strings.Contains(out.Stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr: %s", want, out.Stdout, out.Stderr)
		}
	}
	want := "local.echo:ok remote.echo:ok local.structured:ok local.image:ok local.big:ok local.fail:tool_error " +
		"remote.unknown:denied unknown.unknown:too_large remote.sleep:ok"
	if got := statuses(out.ToolCalls); got != want {
		t.Errorf("tool_calls:\n got %s\nwant %s", got, want)
	}
	if want := (upstream.CallGroup{Server: "unknown", Tool: "unknown", Status: "budget", Count: 1, ArgBytes: 61}); len(out.More) != 1 || out.More[0] != want {
		t.Errorf("tool_calls_more: %+v, want %+v", out.More, want)
	}
	if h.rec.auth != "Bearer s3cret-token" {
		t.Errorf("the HTTP upstream saw Authorization %q", h.rec.auth)
	}
	// tools_search's answer with JavaScript on: each tool's call in both languages.
	for _, want := range []string{"from mcptools import local\nlocal.structured(*, text: str)", "  JavaScript: import { local } from \"mcptools\"; await local.structured({text})\n"} {
		if got := h.m.Search("structured", true); !strings.Contains(got, want) {
			t.Errorf("Search with JavaScript: got\n%s\nwant it to contain %q", got, want)
		}
	}
}

// TestCodeModeTimeout: the exec's timeout cancels the call in flight, and the
// upstream sees the cancellation.
func TestCodeModeTimeout(t *testing.T) {
	h := newHarness(t, "")
	out := h.exec(t, "from mcptools import remote\nprint(\"calling\", flush=True)\nremote.sleep(ms=60000)\n", 6)
	if !out.TimedOut {
		t.Fatalf("not timed out: %+v", out)
	}
	if got := statuses(out.ToolCalls); got != "remote.sleep:timeout" && got != "remote.sleep:canceled" {
		t.Errorf("tool_calls: %s", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.rec.mu.Lock()
		n := h.rec.canceled
		h.rec.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream saw %d cancellations, want 1", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCodeModeConcurrent: two execs at once each get their own results.
func TestCodeModeConcurrent(t *testing.T) {
	h := newHarness(t, "")
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := fmt.Sprintf("import mcptools\nfrom mcptools import local, remote\nr = mcptools.gather(*[(lambda j=j: (local if j %% 2 else remote).echo(text='%d-%%d' %% j)) for j in range(30)])\nprint(r == ['%d-%%d' %% j for j in range(30)])\n", i, i)
			out := h.exec(t, code, 60)
			if out.Stdout != "True\n" || len(out.ToolCalls) != 20 {
				t.Errorf("exec %d: stdout %q, stderr %q, %d calls listed", i, out.Stdout, out.Stderr, len(out.ToolCalls))
			}
			// The 10 calls past the first 20 are counted by tool and status.
			more := map[string]int{}
			for _, g := range out.More {
				more[g.Server+"."+g.Tool+":"+g.Status] += g.Count
			}
			if len(out.More) != 2 || more["local.echo:ok"]+more["remote.echo:ok"] != 10 {
				t.Errorf("exec %d: tool_calls_more %+v, want local.echo and remote.echo, 10 calls", i, out.More)
			}
		}()
	}
	wg.Wait()
}

// TestCodeModeUpstreamDies: an upstream that dies mid-call gives ToolUnavailable
// saying why, and the server reconnects.
func TestCodeModeUpstreamDies(t *testing.T) {
	h := newHarness(t, "")
	out := h.exec(t, `import mcptools
from mcptools import local
try:
    local.die()
except mcptools.ToolUnavailable as e:
    print("unavailable:", e)
`, 60)
	if !strings.Contains(out.Stdout, `unavailable: upstream "local" is unavailable: `) || strings.Contains(out.Stdout, "<nil>") {
		t.Fatalf("stdout %q, stderr %q", out.Stdout, out.Stderr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !h.m.Status()[0].Connected {
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected: %+v", h.m.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out = h.exec(t, "from mcptools import local\nprint(local.echo(text='back'))\n", 60)
	if out.Stdout != "back\n" {
		t.Fatalf("after reconnecting: stdout %q, stderr %q", out.Stdout, out.Stderr)
	}
}

// TestCodeModeApproval: a call of a tool on the approve list runs only when the human
// accepts it through elicitation; declined, or with a client that cannot elicit, it
// raises ToolDenied, never reaches the upstream, and tool_calls says why. Tools not
// on the list run without a question.
func TestCodeModeApproval(t *testing.T) {
	code := `import mcptools
from mcptools import remote
print(remote.echo(text="no question"))
try:
    print(remote.send(text="` + canary + `"))
except mcptools.ToolDenied as e:
    print("denied:", e)
`
	for _, tc := range []struct {
		name     string
		action   string // the human's answer; "" is a client without elicitation
		protocol string // the client's MCP version
		stdout   string
		status   string
		approval string
		sent     int
	}{
		{"accept", "accept", "2025-11-25", "no question\nsent\n", "ok", "accepted", 1},
		{"decline", "decline", "2025-11-25", "no question\ndenied: remote.send needs a human's approval, and the human declined the call\n", "declined", "declined", 0},
		{"cancel", "cancel", "2025-11-25", "no question\ndenied: remote.send needs a human's approval, and the human canceled the call\n", "declined", "canceled", 0},
		{"no elicitation", "", "2025-11-25", "no question\ndenied: remote.send needs a human's approval, and the client cannot ask for it (it has no MCP elicitation capability)\n", "unapproved", "unsupported", 0},
		{"multi round-trip protocol", "accept", "", "no question\ndenied: remote.send needs a human's approval, and the client cannot be asked: the client speaks MCP 2026-07-28, where a tool asks its client only through multi round-trip input requests (SEP-2322), which exec does not support yet\n", "unapproved", "unsupported", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			var copts *mcp.ClientOptions
			if tc.action != "" {
				copts = &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: tc.action}, nil
				}}
			}
			h := newHarnessClient(t, "", copts, tc.protocol)
			out := h.exec(t, code, 60)
			if out.Stdout != tc.stdout {
				t.Errorf("stdout %q, want %q (stderr %q)", out.Stdout, tc.stdout, out.Stderr)
			}
			if got, want := statuses(out.ToolCalls), "remote.echo:ok remote.send:"+tc.status; got != want {
				t.Errorf("tool_calls: %s, want %s", got, want)
			}
			if len(out.ToolCalls) == 2 && (out.ToolCalls[0].Approval != "" || out.ToolCalls[1].Approval != tc.approval) {
				t.Errorf("approvals %q and %q, want \"\" and %q", out.ToolCalls[0].Approval, out.ToolCalls[1].Approval, tc.approval)
			}
			h.rec.mu.Lock()
			sent := h.rec.sent
			h.rec.mu.Unlock()
			if sent != tc.sent {
				t.Errorf("the upstream ran send %d times, want %d", sent, tc.sent)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.action == "" || tc.protocol == "" {
				if len(asked) != 0 {
					t.Errorf("the human was asked %q, want no question", asked)
				}
				return
			}
			if len(asked) != 1 || !strings.Contains(asked[0], "remote.send") || !strings.Contains(asked[0], canary) {
				t.Errorf("the human was asked %q, want one question naming remote.send and its arguments", asked)
			}
		})
	}
}

// TestCodeModeFlood: a program that sends 300 calls naming a server and a tool of
// 100,000 characters gets them denied, then refused past the budget; nothing of the
// names is recorded or logged, and the exec makes one log line per call the budget
// counted and one for the rest.
func TestCodeModeFlood(t *testing.T) {
	h := newHarness(t, `, "limits": {"max_calls": 7}`)
	out := h.exec(t, `import mcptools
name = "q" * 100000
kinds = {}
for i in range(300):
    try:
        mcptools._call(name, name, {})
    except mcptools.ToolError as e:
        kinds[type(e).__name__] = kinds.get(type(e).__name__, 0) + 1
print(sorted(kinds.items()))
`, 60)
	if want := "[('ToolBudgetExceeded', 293), ('ToolDenied', 7)]\n"; out.Stdout != want {
		t.Fatalf("stdout %q, want %q (stderr %q)", out.Stdout, want, out.Stderr)
	}
	if got := statuses(out.ToolCalls); got != strings.TrimSpace(strings.Repeat("unknown.unknown:denied ", 7)) {
		t.Errorf("tool_calls: %s, want 7 unknown.unknown:denied", got)
	}
	if len(out.More) != 1 || out.More[0].Status != "budget" || out.More[0].Count != 293 || out.More[0].Server != "unknown" {
		t.Errorf("tool_calls_more: %+v, want unknown.unknown:budget, 293", out.More)
	}
	logs := h.logs.String()
	if strings.Contains(logs, "qqqq") {
		t.Errorf("the log carries the program's names")
	}
	calls, refused := strings.Count(logs, `"message":"tool call"`), strings.Count(logs, `"message":"tool calls refused past the budget"`)
	if calls != 7 || refused != 1 {
		t.Errorf("the log has %d lines of calls and %d of refused calls, want 7 and 1", calls, refused)
	}
	for line := range strings.Lines(logs) {
		if len(line) > 1024 {
			t.Errorf("a log line of %d bytes: %.200s", len(line), line)
		}
	}
}

// TestCodeModeApprovalCanonical: the human is shown the call's arguments in their
// canonical encoding, and the upstream gets those very bytes; arguments with a key
// twice (the later hidden after padding) are refused before anyone is asked.
func TestCodeModeApprovalCanonical(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	h := newHarnessClient(t, "", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, req.Params.Message)
		mu.Unlock()
		return &mcp.ElicitResult{Action: "accept"}, nil
	}}, "2025-11-25")
	// The program writes its own call messages, as a hostile one would: Python's
	// dicts cannot hold a key twice.
	out := h.exec(t, `import json, mcptools
class Raw:
    loads = staticmethod(json.loads)
    body = ""
    @staticmethod
    def dumps(obj):
        return Raw.body
mcptools._json = Raw
pad = " " * 2000
for args in ['{"text": "boss@corp.example"' + pad + ', "text": "EXFIL"}',
             '{"text": "approve-\\u006de <&> \u202e"' + pad + '}']:
    Raw.body = '{"server": "remote", "tool": "send", "arguments": ' + args + '}'
    try:
        print(mcptools._call("remote", "send", {}))
    except mcptools.ToolError as e:
        print(type(e).__name__, e)
`, 60)
	want := "ToolError the call is refused: the key \"text\" appears twice in one object (in \"arguments\")\nsent\n"
	if out.Stdout != want {
		t.Fatalf("stdout %q, want %q (stderr %q)", out.Stdout, want, out.Stderr)
	}
	if got := statuses(out.ToolCalls); got != "unknown.unknown:invalid remote.send:ok" {
		t.Errorf("tool_calls: %s", got)
	}
	h.rec.mu.Lock()
	sent, sentArgs := h.rec.sent, h.rec.sentArgs
	h.rec.mu.Unlock()
	canonical := `{"text":"approve-me \u003c\u0026\u003e \u202e"}`
	if sent != 1 || sentArgs != canonical {
		t.Errorf("the upstream ran send %d times, last with %s; want once with %s", sent, sentArgs, canonical)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || !strings.Contains(asked[0], "remote.send") || !strings.Contains(asked[0], "Arguments: "+canonical+"\n") {
		t.Errorf("the human was asked %q, want one question with the arguments %s", asked, canonical)
	}
}
