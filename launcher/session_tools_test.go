package launcher

import (
	"context"
	"strings"
	"testing"
	"time"
)

func toolsSession(t *testing.T) *Session {
	t.Helper()
	l := testLauncher(t, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := l.OpenSession(ctx, SessionOptions{})
	if err != nil {
		t.Fatalf("opening a session: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func toolsCell(t *testing.T, s *Session, e *echoTools, code string, timeout time.Duration) Result {
	t.Helper()
	res, err := s.Exec(t.Context(), Job{Code: code, Tools: e.tools(0), Timeout: timeout})
	if err != nil {
		t.Fatalf("exec %.60q: %v", code, err)
	}
	return res
}

// TestSessionTools: a session's calls each get the tools, through a bridge of their
// own (each call's Serve sees that call's calls alone); a table loaded once is used by
// the later calls, and names bound to mcptools in an earlier call still work. A call
// killed while its tool call waits rolls back, and the next call's tools work.
func TestSessionTools(t *testing.T) {
	s := toolsSession(t)
	var e [5]echoTools
	res := toolsCell(t, s, &e[0], `import mcptools
from mcptools import echo
table = {"a": 1, "b": 2, "c": 3}
print(echo.echo(text="loaded")["text"], len(table))
`, 20*time.Second)
	if res.SessionState != SessionKept || res.Stdout != "loaded 3\n" {
		t.Fatalf("call 1: state %q, stdout %q, stderr %q", res.SessionState, res.Stdout, res.Stderr)
	}
	for i, k := range []string{"a", "b", "c"} {
		res = toolsCell(t, s, &e[i+1], `print(echo.echo(text="`+k+`")["text"], table["`+k+`"], sum(table.values()))
`, 20*time.Second)
		if want := k + " " + string(rune('1'+i)) + " 6\n"; res.SessionState != SessionKept || res.Stdout != want {
			t.Fatalf("call %d: state %q, stdout %q, stderr %q; want %q", i+2, res.SessionState, res.Stdout, res.Stderr, want)
		}
	}
	for i := range 4 {
		if e[i].calls != 1 {
			t.Errorf("call %d: its bridge served %d calls, want 1", i+1, e[i].calls)
		}
	}
	res = toolsCell(t, s, &e[4], `echo.wait()`, 2*time.Second)
	if res.SessionState != SessionRolledBack || !res.TimedOut {
		t.Fatalf("a call timed out in a tool call: state %q, timed out %v, stderr %q", res.SessionState, res.TimedOut, res.Stderr)
	}
	select {
	case <-e[4].canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the timed-out call's tool call was not cancelled")
	}
	var again echoTools
	res = toolsCell(t, s, &again, `print(echo.echo(text="again")["text"], table["c"])
`, 20*time.Second)
	if res.SessionState != SessionKept || res.Stdout != "again 3\n" || again.calls != 1 {
		t.Fatalf("after a rollback: state %q, stdout %q, stderr %q, calls %d", res.SessionState, res.Stdout, res.Stderr, again.calls)
	}
}

// TestSessionToolsLeftThread: a thread that one call starts and leaves running goes on
// calling tools. Its calls while a later call runs, and between calls, are refused in
// the sandbox (ToolUnavailable): none reaches the later call's bridge (its budget and
// approvals) or the first call's, which has ended.
func TestSessionToolsLeftThread(t *testing.T) {
	s := toolsSession(t)
	var first, second, third echoTools
	res := toolsCell(t, s, &first, `import threading, time
from mcptools import echo, ToolUnavailable
def loop():
    while True:
        time.sleep(0.05)
        try:
            echo.echo(text="late")
            print("thread: served", flush=True)
        except ToolUnavailable:
            print("thread: refused", flush=True)
        except BaseException as e:
            print("thread:", type(e).__name__, flush=True)
threading.Thread(target=loop, daemon=True).start()
print(echo.echo(text="mine")["text"])
`, 20*time.Second)
	if res.SessionState != SessionKept || !strings.HasSuffix(res.Stdout, "mine\n") {
		t.Fatalf("call 1: state %q, stdout %q, stderr %q", res.SessionState, res.Stdout, res.Stderr)
	}
	first.mu.Lock()
	servedFirst := first.calls
	first.mu.Unlock()
	time.Sleep(500 * time.Millisecond) // the thread calls between calls too
	// Call 2 runs while the thread (in the holder: the first call's process) calls;
	// what the thread prints while a call runs is that call's output.
	res = toolsCell(t, s, &second, `import time
time.sleep(1.5)
print(echo.echo(text="two")["text"])
`, 20*time.Second)
	if res.SessionState != SessionKept || !strings.Contains(res.Stdout, "\ntwo\n") {
		t.Fatalf("call 2: state %q, stdout %q, stderr %q", res.SessionState, res.Stdout, res.Stderr)
	}
	refused := 0
	for l := range strings.Lines(res.Stdout) {
		if l == "two\n" {
			continue
		}
		if l != "thread: refused\n" {
			t.Errorf("call 2: the left thread printed %q, want only refusals", l)
		}
		refused++
	}
	if refused < 5 {
		t.Errorf("call 2: the left thread was refused %d times in 1.5 s, want it calling (stdout %q)", refused, res.Stdout)
	}
	if second.calls != 1 {
		t.Errorf("call 2's bridge served %d calls, want only its own one", second.calls)
	}
	// Call 2's state replaced the first call's process, thread and all; call 3 starts
	// a thread and ends: call 4 finds its calls refused, and serves only its own.
	res = toolsCell(t, s, &third, `import threading, time
from mcptools import echo
threading.Thread(target=loop, daemon=True).start()
print(echo.echo(text="three")["text"])
`, 20*time.Second)
	if res.SessionState != SessionKept || !strings.HasSuffix(res.Stdout, "three\n") {
		t.Fatalf("call 3: state %q, stdout %q, stderr %q", res.SessionState, res.Stdout, res.Stderr)
	}
	third.mu.Lock()
	servedThird := third.calls
	third.mu.Unlock()
	var fourth echoTools
	res = toolsCell(t, s, &fourth, `import time
time.sleep(1)
print(echo.echo(text="four")["text"])
`, 20*time.Second)
	if res.SessionState != SessionKept || !strings.Contains(res.Stdout, "thread: refused\n") || !strings.Contains(res.Stdout, "four\n") || strings.Contains(res.Stdout, "served") {
		t.Fatalf("call 4: state %q, stdout %q, stderr %q", res.SessionState, res.Stdout, res.Stderr)
	}
	if fourth.calls != 1 {
		t.Errorf("call 4's bridge served %d calls, want only its own one", fourth.calls)
	}
	for _, c := range []struct {
		name  string
		e     *echoTools
		atEnd int
	}{{"call 1", &first, servedFirst}, {"call 3", &third, servedThird}} {
		c.e.mu.Lock()
		if c.e.calls != c.atEnd {
			t.Errorf("%s's bridge served %d calls after the call ended", c.name, c.e.calls-c.atEnd)
		}
		c.e.mu.Unlock()
	}
}

func jsToolsCell(t *testing.T, s *Session, tools *Tools, code string, timeout time.Duration) Result {
	t.Helper()
	res, err := s.Exec(t.Context(), Job{Code: code, Language: "javascript", Tools: tools, Timeout: timeout})
	if err != nil {
		t.Fatalf("exec %.60q: %v", code, err)
	}
	return res
}

// TestSessionToolsJavaScript: a session's JavaScript calls each get mcptools through a
// bridge of their own, by static import (made dynamic, as any module's), import() and
// require alike, with the one-shot program's errors; what a call kept of the module (in a global) works in later calls,
// whose catalog it follows; a name the allowlist lacks is an import's SyntaxError. A
// call killed while its tool call waits loses the JavaScript state (its tool call
// cancelled), and the next call's fresh node has the tools; Python's tools meanwhile.
func TestSessionToolsJavaScript(t *testing.T) {
	s := toolsSession(t)
	var j [3]jsTools
	res := jsToolsCell(t, s, j[0].tools(), `import { echo, ToolError } from "mcptools";
import os, { EOL as eol } from "node:os";
import * as path from 'node:path';
const m = require("mcptools");
globalThis.kept = (await import("mcptools")).default;
const table = { a: 1, b: 2, c: 3 };
console.log((await echo.echo({ text: "loaded" })).text, m.echo === echo, kept.echo === echo, m.ToolError === ToolError);
console.log(path.basename("/a/b"), os.EOL === eol);
`, 20*time.Second)
	if res.SessionState != SessionKept || res.Stdout != "loaded true true true\nb true\n" {
		t.Fatalf("call 1: state %q, stdout %q, stderr %q", res.SessionState, res.Stdout, res.Stderr)
	}
	res = jsToolsCell(t, s, j[1].tools(), `const got = [];
for (const k of ["a", "b", "c"]) got.push((await kept.echo.echo({ text: k })).text + table[k]);
console.log(got.join(","), JSON.stringify(await Promise.all([kept.echo.slow_echo({ n: 1 }), echo.echo({ text: "x" })])));
for (const f of [echo.fail, kept.echo.secret, echo.costly]) {
  try { await f({}); } catch (e) { console.log(e.constructor.name, e instanceof ToolError, e.kind, e.message); }
}
`, 20*time.Second)
	want := `a1,b2,c3 [{"n":1},{"text":"x"}]
ToolError true tool no such record
ToolDenied true denied echo.secret is not allowed
ToolBudgetExceeded true budget the run's call budget (3) is spent
`
	if res.SessionState != SessionKept || res.Stdout != want {
		t.Fatalf("call 2: state %q, stdout %q, stderr %q; want %q", res.SessionState, res.Stdout, res.Stderr, want)
	}
	if len(j[0].calls) != 1 || len(j[1].calls) != 8 {
		t.Errorf("the calls' bridges served %v and %v, want 1 and 8", j[0].calls, j[1].calls)
	}
	res = jsToolsCell(t, s, j[2].tools(), `import { nope } from "mcptools";`, 20*time.Second)
	if res.ExitCode != 1 || res.SessionState != SessionKept || !strings.Contains(res.Stderr, "SyntaxError: The requested module 'mcptools' does not provide an export named 'nope'") {
		t.Fatalf("a static import of a name not allowed: exit %d, state %q, stderr %q", res.ExitCode, res.SessionState, res.Stderr)
	}
	res = jsToolsCell(t, s, j[2].tools(), `const { nope } = require("mcptools");`, 20*time.Second)
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "SyntaxError: The requested module 'mcptools' does not provide an export named 'nope'") {
		t.Fatalf("a require of a name not allowed: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}

	// Another catalog (echo and wait): the kept object follows it. A timeout in wait.
	var e, again echoTools
	res = jsToolsCell(t, s, e.tools(0), `console.log(typeof kept.echo.wait, typeof kept.echo.fail); await kept.echo.wait({});`, 2*time.Second)
	if res.SessionState != SessionLost || res.LostLanguage != "javascript" || !res.TimedOut || res.Stdout != "function undefined\n" {
		t.Fatalf("a call timed out in a tool call: state %q (%q), timed out %v, stdout %q, stderr %q", res.SessionState, res.LostLanguage, res.TimedOut, res.Stdout, res.Stderr)
	}
	select {
	case <-e.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the timed-out call's tool call was not cancelled")
	}
	res = toolsCell(t, s, &again, `from mcptools import echo
print(echo.echo(text="python")["text"])
`, 20*time.Second)
	if res.SessionState != SessionKept || res.Stdout != "python\n" || again.calls != 1 {
		t.Fatalf("python after: state %q, stdout %q, stderr %q, calls %d", res.SessionState, res.Stdout, res.Stderr, again.calls)
	}
	var fresh echoTools
	res = jsToolsCell(t, s, fresh.tools(0), `const { echo } = require("mcptools");
console.log(typeof kept, (await echo.echo({ text: "fresh" })).text);
`, 20*time.Second)
	if res.SessionState != SessionKept || res.Stdout != "undefined fresh\n" || fresh.calls != 1 {
		t.Fatalf("a fresh node: state %q, stdout %q, stderr %q, calls %d", res.SessionState, res.Stdout, res.Stderr, fresh.calls)
	}
}
