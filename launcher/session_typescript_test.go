package launcher_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

func tsJob(code string) launcher.Job { return launcher.Job{Code: code, Language: "typescript"} }

// TestSessionTypeScript: a TypeScript call runs in the session's node as a JavaScript
// call does, once esbuild (node's child) has stripped its types: it shares the global
// scope with the JavaScript calls, both ways; its stack traces name its TypeScript
// lines; esbuild's refusal fails the call and keeps the state; a timeout loses the
// JavaScript state (node's), as a JavaScript call's does.
func TestSessionTypeScript(t *testing.T) {
	l := launchertest.New(t, launcher.Options{})
	s := openSession(t, l, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})

	wantState(t, sessionExec(t, s, jsJob("const c = 1; globalThis.shared = 'js'")), launcher.SessionKept, "")
	wantState(t, sessionExec(t, s, tsJob(`interface P { n: number }
enum E { A = 3 }
const p: P = { n: c + 1 };
const w: number = await Promise.resolve<number>(E.A);
console.log(p.n, shared, w);`)), launcher.SessionKept, "2 js 3\n")
	wantState(t, sessionExec(t, s, jsJob("console.log(p.n, E.A)")), launcher.SessionKept, "2 3\n")
	// Declared again by a later TypeScript call, as a JavaScript call may.
	wantState(t, sessionExec(t, s, tsJob("const p: number = 5;\nconsole.log(p + c)")), launcher.SessionKept, "6\n")

	res := sessionExec(t, s, tsJob("type T = number;\n\n\nfunction boom(n: T): never {\n  throw new Error(`boom ${n}`);\n}\nboom(1);"))
	if res.ExitCode != 1 || !regexp.MustCompile(`Error: boom 1\n\s+at boom \(/exec-\d+\.ts:5:9\)`).MatchString(res.Stderr) || res.SessionState != launcher.SessionKept {
		t.Fatalf("exception: got exit %d, state %q, stderr %q; want 1, kept, a stack naming /exec-N.ts:5:9", res.ExitCode, res.SessionState, res.Stderr)
	}
	res = sessionExec(t, s, tsJob("const q: number = 1;\nlet x: number = ;"))
	if res.ExitCode != 1 || !regexp.MustCompile(`/exec-\d+\.ts:2:16`).MatchString(res.Stderr) || res.SessionState != launcher.SessionKept {
		t.Fatalf("syntax error: got exit %d, state %q, stderr %q; want 1, kept, esbuild's error at 2:16", res.ExitCode, res.SessionState, res.Stderr)
	}
	wantState(t, sessionExec(t, s, jsJob("console.log(typeof q, c)")), launcher.SessionKept, "undefined 1\n")

	res = sessionExec(t, s, launcher.Job{Code: "const spin: () => never = () => { for (;;) {} };\nspin();", Language: "typescript", Timeout: time.Second})
	if !res.TimedOut || res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" || !strings.Contains(res.Stderr, "JavaScript state was lost") {
		t.Fatalf("timeout: got timed out %v, state %q (%q), stderr %q, want true, lost (javascript)", res.TimedOut, res.SessionState, res.LostLanguage, res.Stderr)
	}
	wantState(t, sessionExec(t, s, tsJob("console.log(typeof c as string)")), launcher.SessionKept, "undefined\n")
}
