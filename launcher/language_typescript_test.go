package launcher

import (
	"strings"
	"testing"
	"time"
)

// TestTypeScriptPrograms is the contract battery for "typescript": boot.py's child has
// the image's esbuild strip the types (no type checking), then runs the JavaScript as
// a JavaScript program, with a source map that names the TypeScript lines. Cold
// sandboxes: the child waits for PID 1's go before esbuild starts (a warm child has it
// long before its code comes), and nothing else of the path differs warm.
func TestTypeScriptPrograms(t *testing.T) {
	l := testLauncher(t, Options{MaxOutputBytes: 64 << 10})
	tests := []struct {
		name     string
		job      Job
		wantExit int
		wantOut  string // exact stdout
		wantErr  string // substring of stderr
	}{
		{name: "hello", job: Job{Code: "const who: string = 'world';\nconsole.log(`hello ${who}`); console.error('oops')"}, wantOut: "hello world\n", wantErr: "oops"},
		{name: "types", job: Job{Code: `interface Point { x: number; y?: number }
type Pair<T> = [T, T];
enum Color { Red = 1, Green }
const enum Size { S = "s" }
namespace Geo { export const origin: Point = { x: 0 }; }
abstract class Shape { abstract area(): number; }
class Square extends Shape { constructor(private readonly side: number) { super(); } area(): number { return this.side ** 2; } }
function first<T>(p: Pair<T>): T { return p[0]; }
const s = new Square(3) as Shape;
let n!: number;
n = first<number>([Color.Green, 0]);
console.log(n, Color[1], Size.S, Geo.origin.x, s.area(), (<any>"cast").length satisfies number);`}, wantOut: "2 Red s 0 9 4\n"},
		// esbuild lowers what node 20 lacks: standard decorators, using.
		{name: "decorators and using", job: Job{Code: "function tag(c: any, ctx: ClassDecoratorContext) { console.log(ctx.kind); }\n@tag class A {}\n{\n  using r = { [Symbol.dispose]() { console.log('disposed'); } };\n}"}, wantOut: "class\ndisposed\n"},
		{name: "no type checking", job: Job{Code: "const n: number = 'not a number' as unknown as number;\nlet s: string = 42 as any;\nconsole.log(typeof n, typeof s)"}, wantOut: "string number\n"},
		{name: "import type", job: Job{Code: "import type { Stats } from 'node:fs';\nimport { type Dirent, readFileSync } from 'node:fs';\nlet s: Stats | Dirent | undefined;\nprocess.stdout.write(readFileSync(0, 'utf8').toUpperCase())", Stdin: "abc\n"}, wantOut: "ABC\n"},
		{name: "top-level await", job: Job{Code: "const x: number = await new Promise<number>((r) => setTimeout(() => r(42), 10));\nconsole.log(x)"}, wantOut: "42\n"},
		{name: "stdin absent", job: Job{Code: "import { readFileSync } from 'node:fs';\nconsole.log(JSON.stringify(readFileSync(0, 'utf8')))"}, wantOut: "\"\"\n"},
		{name: "require", job: Job{Code: "const os = require('os') as typeof import('os');\nconsole.log(os.userInfo().uid)"}, wantOut: "65532\n"},
		{name: "exit code", job: Job{Code: "const code: number = 3;\nprocess.exitCode = code"}, wantExit: 3},
		// esbuild's error, with the line and column, as the program's stderr; exit 1.
		{name: "syntax error", job: Job{Code: "const ok: number = 1;\nlet x: number = ;"}, wantExit: 1, wantErr: "/exec.ts:2:16"},
		// The source map: node names the TypeScript line and column, not the line of
		// the JavaScript esbuild printed (the types and the blank lines are gone there).
		{name: "stack trace line", job: Job{Code: "interface A {\n  a: number;\n}\n\nfunction boom(n: number): never {\n  throw new Error(`boom ${n}`);\n}\nboom(1);"}, wantExit: 1, wantErr: "/exec.ts:6:9"},
		{name: "unhandled rejection", job: Job{Code: "type E = Error;\n\nconst e: E = new Error('nope');\nawait Promise.reject(e);"}, wantExit: 1, wantErr: "/exec.ts:3:14"},
		// Past one argument (MAX_ARG_STRLEN, 128 KiB), as in JavaScript: esbuild reads it
		// from a memory file, and node its output from another.
		{name: "big code", job: Job{Code: "let pad: number = 0;\n" + strings.Repeat("pad += 1 as number; // padding\n", 8000) + "console.log(pad)"}, wantOut: "8000\n"},
		{name: "files in and out", job: Job{Files: []File{{Name: "data/in.csv", Data: []byte("x\n1\n2\n3\n")}},
			Code: "import fs from 'node:fs';\nconst rows: number[] = fs.readFileSync('data/in.csv', 'utf8').trim().split('\\n').slice(1).map(Number);\nconsole.log(rows.reduce((a: number, b: number) => a + b))"}, wantOut: "6\n"},
		{name: "seccomp filter", job: Job{Code: "import fs from 'node:fs';\nconst m: RegExpMatchArray | null = fs.readFileSync('/proc/self/status', 'utf8').match(/^(NoNewPrivs|Seccomp):.*$/gm);\nconsole.log(m!.join(' ').replace(/\\s+/g, ''))"}, wantOut: "NoNewPrivs:1Seccomp:2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.job.Language = "typescript"
			res, err := l.Run(t.Context(), tt.job)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tt.wantExit {
				t.Errorf("exit code: got %d, want %d (stderr %q)", res.ExitCode, tt.wantExit, res.Stderr)
			}
			if res.Stdout != tt.wantOut {
				t.Errorf("stdout: got %q, want %q (stderr %q)", res.Stdout, tt.wantOut, res.Stderr)
			}
			if !strings.Contains(res.Stderr, tt.wantErr) {
				t.Errorf("stderr: got %q, want it to contain %q", res.Stderr, tt.wantErr)
			}
			if res.TimedOut || res.OOMKilled || res.Truncated {
				t.Errorf("timed out %v, oom killed %v, truncated %v: want none", res.TimedOut, res.OOMKilled, res.Truncated)
			}
		})
	}
}

// TestBridgeTypeScript: code mode in TypeScript: the import of "mcptools" (a value, a
// class and a type-only import beside it) is rewritten after esbuild's transform, as
// JavaScript's; a tool is called in a loop and an error is read as its class.
func TestBridgeTypeScript(t *testing.T) {
	l := testLauncher(t, Options{})
	var j jsTools
	res, err := l.Run(t.Context(), Job{
		Language: "typescript",
		Code: `import { echo, ToolError } from "mcptools";
import type { ToolDenied } from "mcptools";
interface Echoed { text: string }
const got: string[] = [];
for (let i = 0; i < 5; i++) got.push(((await echo.echo({ text: String(i) })) as Echoed).text);
console.log(got.join(","));
try {
  await echo.secret({});
} catch (e) {
  const d = e as ToolDenied;
  console.log(d instanceof ToolError, d.kind);
}`,
		Tools: j.tools(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "0,1,2,3,4\ntrue denied\n"; res.Stdout != want || res.ExitCode != 0 {
		t.Fatalf("got exit %d, stdout %q, stderr %q; want stdout %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	if len(j.calls) != 6 {
		t.Errorf("Serve called %d times (%v), want 6", len(j.calls), j.calls)
	}
}

// TestSessionToolsTypeScript: a session's TypeScript call gets mcptools as a JavaScript
// call does (the import rewritten before esbuild's transform, which keeps it, then made
// dynamic by the session's node, a type-only import removed), and what it kept of the
// module in a global serves a later JavaScript call through that call's bridge.
func TestSessionToolsTypeScript(t *testing.T) {
	s := toolsSession(t)
	var j [2]jsTools
	res, err := s.Exec(t.Context(), Job{Language: "typescript", Tools: j[0].tools(), Timeout: 20 * time.Second, Code: `import { echo } from "mcptools";
import type { ToolError } from "mcptools";
interface Echoed { text: string }
const got: string[] = [];
for (let i = 0; i < 3; i++) got.push(((await echo.echo({ text: String(i) })) as Echoed).text);
globalThis.keptTs = echo;
let e: ToolError | undefined;
console.log(got.join(","));`})
	if err != nil || res.SessionState != SessionKept || res.Stdout != "0,1,2\n" || len(j[0].calls) != 3 {
		t.Fatalf("typescript: err %v, state %q, stdout %q, stderr %q, calls %v", err, res.SessionState, res.Stdout, res.Stderr, j[0].calls)
	}
	res = jsToolsCell(t, s, j[1].tools(), `console.log((await keptTs.echo({ text: "js" })).text, typeof got)`, 20*time.Second)
	if res.SessionState != SessionKept || res.Stdout != "js object\n" || len(j[1].calls) != 1 {
		t.Fatalf("javascript after: state %q, stdout %q, stderr %q, calls %v", res.SessionState, res.Stdout, res.Stderr, j[1].calls)
	}
}
