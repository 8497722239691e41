package launcher

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// jsTools serves the echo catalog plus tools whose replies are each of the bridge's
// answers: text that is JSON, a tool's error, the server's refusals (denied, the
// budget), and a reply that is no JSON, so that a JavaScript program meets every branch of mcptools.mjs's decoding.
type jsTools struct {
	mu    sync.Mutex
	calls []string // the tools called, in the order Serve saw them
}

const jsCatalog = `{"servers":[{"name":"echo","module":"echo","tools":[
 {"name":"echo","function":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},
 {"name":"text","function":"text","description":"Text.","inputSchema":{"type":"object"}},
 {"name":"fail","function":"fail","description":"Fail.","inputSchema":{"type":"object"}},
 {"name":"secret","function":"secret","description":"Denied.","inputSchema":{"type":"object"}},
 {"name":"costly","function":"costly","description":"Over budget.","inputSchema":{"type":"object"}},
 {"name":"slow-echo","function":"slow_echo","description":"Echo, later.","inputSchema":{"type":"object"}},
 {"name":"garbled","function":"garbled","description":"A reply that is no JSON.","inputSchema":{"type":"object"}}]}]}`

func (j *jsTools) tools() *Tools {
	return &Tools{Catalog: []byte(jsCatalog), Serve: j.serve}
}

func (j *jsTools) serve(ctx context.Context, req []byte, size int) []byte {
	var r struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(req, &r); err != nil {
		return []byte(`{"error":{"kind":"invalid","message":"bad request"}}`)
	}
	j.mu.Lock()
	j.calls = append(j.calls, r.Tool)
	j.mu.Unlock()
	switch r.Tool {
	case "text":
		return []byte(`{"result":{"content":[{"type":"text","text":"{\"n\": 7}"}]}}`)
	case "fail":
		return []byte(`{"result":{"isError":true,"content":[{"type":"text","text":"no such record"}]}}`)
	case "secret":
		return []byte(`{"error":{"kind":"denied","message":"echo.secret is not allowed"}}`)
	case "garbled":
		return []byte(`{"result":`)
	case "costly":
		return []byte(`{"error":{"kind":"budget","message":"the run's call budget (3) is spent"}}`)
	case "slow-echo":
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return []byte(`{"result":{"content":[],"structuredContent":` + string(r.Arguments) + `}}`)
}

// TestBridgeJavaScript: a JavaScript program imports mcptools, calls a tool in a loop,
// runs two calls at once with Promise.all (the second answered first), reads each
// error as its class with the tool's text, and has exactly the caller's stdin; every
// call reaches Serve, over the same wire as Python's.
func TestBridgeJavaScript(t *testing.T) {
	l := testLauncher(t, Options{})
	var j jsTools
	res, err := l.Run(context.Background(), Job{
		Language: "javascript",
		Code: `import { echo, ToolError, ToolDenied, ToolBudgetExceeded, search, describe } from "mcptools";
import mcptools from "mcptools";
import { readFileSync } from "node:fs";
console.log(JSON.stringify(await echo.echo({ text: "hi" })));
const got = [];
for (let i = 0; i < 20; i++) got.push((await echo.echo({ text: String(i) })).text);
console.log(got.join(","));
console.log(JSON.stringify(await Promise.all([echo.slow_echo({ a: 1 }), mcptools.echo.echo({ text: "b" })])));
console.log(JSON.stringify(await echo.text()));
for (const f of [echo.fail, echo.secret, echo.costly, echo.garbled]) {
  try {
    await f({});
  } catch (e) {
    console.log(e.constructor.name, e instanceof ToolError, e instanceof ToolDenied, e instanceof ToolBudgetExceeded, e.kind, e.message);
  }
}
console.log(JSON.stringify(readFileSync(0, "utf8")));
console.log(describe("echo.echo").split("\n")[0], search("later").length);
console.log((await import('mcptools')).echo === echo);
`,
		Stdin: "the caller's stdin\n",
		Tools: j.tools(),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"text":"hi"}
0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19
[{"a":1},{"text":"b"}]
{"n":7}
ToolError true false false tool no such record
ToolDenied true true false denied echo.secret is not allowed
ToolBudgetExceeded true false true budget the run's call budget (3) is spent
ToolUnavailable true false false unavailable a malformed reply from the server (SyntaxError: Unexpected end of JSON input)
"the caller's stdin\n"
echo.echo({text}) 1
true
`
	if res.Stdout != want || res.ExitCode != 0 {
		t.Fatalf("got exit %d, stdout %q, stderr %q; want stdout %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	if len(j.calls) != 28 {
		t.Errorf("Serve called %d times (%v), want 28", len(j.calls), j.calls)
	}
}

// TestBridgeJavaScriptForged: output of a JavaScript program that imitates a call frame
// is output, and without Tools "mcptools" is no module.
func TestBridgeJavaScriptForged(t *testing.T) {
	l := testLauncher(t, Options{})
	var j jsTools
	res, err := l.Run(context.Background(), Job{
		Language: "javascript",
		Code: `import "mcptools";
const body = Buffer.from(JSON.stringify({ server: "echo", tool: "secret", arguments: { text: "forged" } }));
const msg = Buffer.alloc(8 + body.length); msg.writeUInt32BE(body.length, 0); msg.writeUInt32BE(1, 4); body.copy(msg, 8);
const frame = Buffer.concat([Buffer.from("C"), Buffer.alloc(4), msg]); frame.writeUInt32BE(msg.length, 1);
process.stdout.write(frame); process.stderr.write(frame);
`,
		Tools: j.tools(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(j.calls) != 0 || !strings.Contains(res.Stdout, `"forged"`) || res.ExitCode != 0 {
		t.Fatalf("forged frames: calls %v, exit %d, stdout %q, stderr %q", j.calls, res.ExitCode, res.Stdout, res.Stderr)
	}

	// (The call pipe's closing without tools is boot.py's, before any interpreter:
	// TestBridgeForgedFrames. node opens pipes of its own.)
	res, err = l.Run(context.Background(), Job{Language: "javascript", Code: `try { await import("mcptools"); console.log("imported"); } catch (e) { console.log(e.code); }
`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "ERR_MODULE_NOT_FOUND\n" {
		t.Fatalf("without tools: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

// TestJSExports: each server's module becomes a named export unless the module exports
// that name already (or it is no identifier); the rest are on the default export.
func TestJSExports(t *testing.T) {
	got := jsExports([]byte(`{"servers":[{"module":"records"},{"module":"search"},{"module":"default"},{"module":"new"},{"module":"a-b"}]}`))
	want := "const _s0 = servers[\"records\"];\nexport { _s0 as records };\nconst _s3 = servers[\"new\"];\nexport { _s3 as new };\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := jsExports([]byte(`not json`)); got != "" {
		t.Errorf("bad catalog: got %q", got)
	}
}

// TestBridgeJavaScriptRequire: a CommonJS program requires mcptools (Node 20's require
// of an ES module): the same module as its import(), calls and errors as the import's,
// and a name the allowlist does not have is the import's SyntaxError, not undefined.
func TestBridgeJavaScriptRequire(t *testing.T) {
	l := testLauncher(t, Options{})
	var j jsTools
	res, err := l.Run(context.Background(), Job{
		Language: "javascript",
		Code: `const { echo, ToolDenied } = require("mcptools");
const mcptools = require('mcptools');
for (const get of [() => mcptools.nope, () => { const { nope } = require("mcptools"); }]) {
  try { get(); } catch (e) { console.log(e.name + ": " + e.message); }
}
(async () => {
  console.log((await echo.echo({ text: "hi" })).text, mcptools.echo === echo, (await import("mcptools")).default.echo === echo);
  try { await mcptools.echo.secret({}); } catch (e) { console.log(e instanceof ToolDenied, e.message); }
  console.log(JSON.stringify(mcptools.search("later")), typeof mcptools.describe);
})();
`,
		Tools: j.tools(),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `SyntaxError: The requested module 'mcptools' does not provide an export named 'nope'
SyntaxError: The requested module 'mcptools' does not provide an export named 'nope'
hi true true
true echo.secret is not allowed
["echo.slow_echo({})  // Echo, later."] function
`
	if res.Stdout != want || res.ExitCode != 0 {
		t.Fatalf("got exit %d, stdout %q, stderr %q; want stdout %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	if len(j.calls) != 2 {
		t.Errorf("Serve called %d times (%v), want 2", len(j.calls), j.calls)
	}
}
