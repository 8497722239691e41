package launcher

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoTools is a catalog of one server "echo" with a tool "echo" and a tool "wait",
// served by a function that answers echo with its arguments as structured content,
// and wait only when ctx ends (recording that it did).
type echoTools struct {
	mu       sync.Mutex
	calls    int
	refused  []int // sizes of requests over MaxRequest
	canceled chan struct{}
}

const echoCatalog = `{"servers":[{"name":"echo","module":"echo","tools":[
 {"name":"echo","function":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},
 {"name":"wait","function":"wait","description":"Wait.","inputSchema":{"type":"object"}}]}]}`

func (e *echoTools) tools(maxRequest int) *Tools {
	e.canceled = make(chan struct{})
	return &Tools{Catalog: []byte(echoCatalog), MaxRequest: maxRequest, Serve: e.serve}
}

func (e *echoTools) serve(ctx context.Context, req []byte, size int) []byte {
	e.mu.Lock()
	e.calls++
	if req == nil {
		e.refused = append(e.refused, size)
	}
	e.mu.Unlock()
	if req == nil {
		return []byte(`{"error":{"kind":"too_large","message":"too large"}}`)
	}
	var r struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(req, &r); err != nil {
		return []byte(`{"error":{"kind":"invalid","message":"bad request"}}`)
	}
	if r.Tool == "wait" {
		<-ctx.Done()
		close(e.canceled)
		return []byte(`{"error":{"kind":"timeout","message":"canceled"}}`)
	}
	return []byte(`{"result":{"content":[],"structuredContent":` + string(r.Arguments) + `}}`)
}

// TestBridgeCall: a program calls a tool as a Python function and gets its result,
// while its own stdin is exactly the caller's, apart from the replies.
func TestBridgeCall(t *testing.T) {
	l := testLauncher(t, Options{})
	var e echoTools
	res, err := l.Run(context.Background(), Job{
		Code: `import sys, mcptools
from mcptools import echo
print(echo.echo(text="hi"))
print([echo.echo(text=str(i))["text"] for i in range(20)] == [str(i) for i in range(20)])
print(mcptools.gather(lambda: echo.echo(text="a"), lambda: echo.echo(text="b")))
print(repr(sys.stdin.read()))
print(mcptools.describe("echo.echo").splitlines()[0])
`,
		Stdin: "the caller's stdin\n",
		Tools: e.tools(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "{'text': 'hi'}\nTrue\n[{'text': 'a'}, {'text': 'b'}]\n\"the caller's stdin\\n\"\necho.echo(*, text)\n"
	if res.Stdout != want || res.ExitCode != 0 {
		t.Fatalf("got exit %d, stdout %q, stderr %q; want stdout %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	if e.calls != 23 {
		t.Errorf("Serve called %d times, want 23", e.calls)
	}
}

// TestBridgeForgedFrames: output that imitates a call frame (or an exit frame) is just
// output, and without Tools there is neither a module nor a call stream.
func TestBridgeForgedFrames(t *testing.T) {
	l := testLauncher(t, Options{})
	forge := `import os, sys, json
body = json.dumps({"server": "echo", "tool": "echo", "arguments": {"text": "forged"}}).encode()
msg = len(body).to_bytes(4, "big") + (1).to_bytes(4, "big") + body
frame = b"C" + len(msg).to_bytes(4, "big") + msg
sys.stdout.buffer.write(frame); sys.stdout.flush()
os.write(2, frame)
os.write(1, b"X" + (2).to_bytes(4, "big") + b"{}")
`
	var e echoTools
	res, err := l.Run(context.Background(), Job{Code: forge + "print()\n", Tools: e.tools(0)})
	if err != nil {
		t.Fatal(err)
	}
	if e.calls != 0 || !strings.Contains(res.Stdout, `"forged"`) || !strings.Contains(res.Stderr, `"forged"`) || res.ExitCode != 0 {
		t.Fatalf("forged frames: %d calls, exit %d, stdout %q, stderr %q", e.calls, res.ExitCode, res.Stdout, res.Stderr)
	}

	// No tools: no module, and every descriptor beyond 0-2 that could reach the
	// bootstrap is closed (the call pipe among them).
	res, err = l.Run(context.Background(), Job{Code: `import os
try:
    import mcptools
    print("imported")
except ImportError:
    print("no module")
print(sorted(int(f) for f in os.listdir("/proc/self/fd") if int(f) > 2 and os.path.exists("/proc/self/fd/" + f) and "pipe" in os.readlink("/proc/self/fd/" + f)))
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "no module\n[]\n" {
		t.Fatalf("without tools: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

// TestBridgeLimits: a request over MaxRequest is refused without being buffered, and
// the exec's timeout cancels a call in flight.
func TestBridgeLimits(t *testing.T) {
	l := testLauncher(t, Options{})
	var e echoTools
	res, err := l.Run(context.Background(), Job{
		Code: `import mcptools
from mcptools import echo
print("start", flush=True)
try:
    echo.echo(text="x" * 100000)
except mcptools.ToolBudgetExceeded as err:
    print("refused:", err)
print(echo.echo(text="small"))
echo.wait()
`,
		Timeout: 8 * time.Second,
		Tools:   e.tools(1000),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Stdout, "start\nrefused: too large\n{'text': 'small'}\n") || !res.TimedOut {
		t.Fatalf("got timed_out %v, stdout %q, stderr %q", res.TimedOut, res.Stdout, res.Stderr)
	}
	if len(e.refused) != 1 || e.refused[0] < 100000 {
		t.Errorf("refused sizes %v, want one over 100000", e.refused)
	}
	select {
	case <-e.canceled:
	case <-time.After(5 * time.Second):
		t.Error("the call in flight was not canceled when the exec timed out")
	}
}
