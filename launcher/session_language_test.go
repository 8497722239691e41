package launcher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

func bashJob(code string) launcher.Job { return launcher.Job{Code: code, Language: "bash"} }
func jsJob(code string) launcher.Job   { return launcher.Job{Code: code, Language: "javascript"} }

// TestSessionBash: a bash call starts from the state the last bash call that ended by
// itself saved (its directory, variables with their attributes, arrays, exported ones,
// functions), a failure under -e included; a timeout rolls it back; stdin, input files
// and /tmp/outputs are each call's; Python's state is its own, /tmp is shared.
func TestSessionBash(t *testing.T) {
	l := launchertest.New(t, launcher.Options{})
	s := openSession(t, l, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})

	wantState(t, sessionExec(t, s, bashJob(`mkdir -p /tmp/work && cd /tmp/work
x=41; declare -i n=2; arr=(one "two words" $'three\nlines'); declare -A m=([k]=v)
export EV=seen; greet() { echo "hi $1"; }
printf 'a,b\n1,2\n' > data.csv`)), launcher.SessionKept, "")
	wantState(t, sessionExec(t, s, bashJob(`n+=1; echo "$PWD $x $n ${#arr[@]} ${arr[1]} ${m[k]}"; bash -c 'echo "$EV"'; greet you`)),
		launcher.SessionKept, "/tmp/work 41 3 3 two words v\nseen\nhi you\n")

	// A failure under -e keeps what ran before it, with the failing command's status.
	res := sessionExec(t, s, bashJob("y=7\nfalse\ny=8"))
	if res.ExitCode != 1 || res.SessionState != launcher.SessionKept {
		t.Fatalf("failure: got exit %d, state %q, stderr %q, want 1, kept", res.ExitCode, res.SessionState, res.Stderr)
	}
	wantState(t, sessionExec(t, s, bashJob(`echo $y`)), launcher.SessionKept, "7\n")

	// A timeout: the call changed x and the directory, then looped; both are as before.
	res = sessionExec(t, s, launcher.Job{Code: "x=0; cd /; sleep 100 & while :; do :; done", Language: "bash", Timeout: time.Second})
	if !res.TimedOut || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("timeout: got timed out %v, state %q (stderr %q), want true, rolled_back", res.TimedOut, res.SessionState, res.Stderr)
	}
	wantState(t, sessionExec(t, s, bashJob(`echo "$PWD $x"`)), launcher.SessionKept, "/tmp/work 41\n")
	// A cancel, the same.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(time.Second, cancel)
	if res, err := s.Exec(ctx, launcher.Job{Code: "x=1; while :; do :; done", Language: "bash", Timeout: 60 * time.Second}); err == nil || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("cancel: got %v, state %q, want the context's error, rolled_back", err, res.SessionState)
	}
	wantState(t, sessionExec(t, s, bashJob(`echo "$x"`)), launcher.SessionKept, "41\n")

	// Stdin and input files are the call's; outputs come back with it.
	res = sessionExec(t, s, launcher.Job{Code: "read -r l; cat /tmp/in.txt; echo \" $l\"; echo r > /tmp/outputs/r.txt", Language: "bash",
		Stdin: "line\n", Files: []launcher.File{{Name: "in.txt", Data: []byte("file")}}})
	wantState(t, res, launcher.SessionKept, "file line\n")
	if len(res.Files) != 1 || res.Files[0].Name != "r.txt" {
		t.Fatalf("files: got %+v, want r.txt", res.Files)
	}

	// Python has its own state and the same /tmp: the CSV bash wrote.
	wantState(t, sessionExec(t, s, launcher.Job{Code: "import csv\nprint(list(csv.reader(open('/tmp/work/data.csv'))), 'x' in globals())"}),
		launcher.SessionKept, "[['a', 'b'], ['1', '2']] False\n")
	wantState(t, sessionExec(t, s, bashJob(`echo $x`)), launcher.SessionKept, "41\n")
}

// TestSessionJavaScript: a JavaScript call runs in the global scope of the session's
// node process (top-level const, let, function, class and await; a const or class a
// later call declares again); a call's uncaught
// exception is exit 1 and keeps the state; a killed call loses the JavaScript state
// alone (said so: lost, and a note), Python's and the files stay, and the next call
// starts a fresh node; a Python call's timeout leaves node alone.
func TestSessionJavaScript(t *testing.T) {
	l := launchertest.New(t, launcher.Options{Memory: 160 * launcher.MiB})
	s := openSession(t, l, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})

	wantState(t, sessionExec(t, s, launcher.Job{Code: "x = 41\nopen('/tmp/py.txt', 'w').write('py')"}), launcher.SessionKept, "")
	wantState(t, sessionExec(t, s, jsJob(`const c = 1; let o = {n: 1}; function f() { return c + 1 }
class K { m() { return 'k' } }
const v = await new Promise((r) => setTimeout(() => r(5), 10));
setTimeout(() => console.log('pending ran'), 50);`)), launcher.SessionKept, "pending ran\n")
	wantState(t, sessionExec(t, s, jsJob("const p = await import('node:path'); console.log(p.basename('/a/b'))")),
		launcher.SessionKept, "b\n")
	res := sessionExec(t, s, launcher.Job{Code: `o.n++; const fs = require('fs'); fs.writeFileSync('/tmp/outputs/j.txt', 'j')
console.log(c, o.n, f(), new K().m(), v, fs.readFileSync('/tmp/py.txt', 'utf8'), fs.readFileSync('d/in.txt', 'utf8'), fs.readFileSync(0, 'utf8'))`,
		Language: "javascript", Stdin: "in", Files: []launcher.File{{Name: "d/in.txt", Data: []byte("file")}}})
	wantState(t, res, launcher.SessionKept, "1 2 2 k 5 py file in\n")
	if len(res.Files) != 1 || res.Files[0].Name != "j.txt" || string(res.Files[0].Data) != "j" {
		t.Fatalf("files: got %+v, want j.txt", res.Files)
	}
	// An input file replaces the one of an earlier call; stdin is this call's.
	wantState(t, sessionExec(t, s, launcher.Job{Code: "console.log(require('fs').readFileSync('d/in.txt', 'utf8'), require('fs').readFileSync(0, 'utf8'))",
		Language: "javascript", Stdin: "two", Files: []launcher.File{{Name: "d/in.txt", Data: []byte("file2")}}}), launcher.SessionKept, "file2 two\n")

	// An exception: exit 1, its stack on stderr, what ran before it kept.
	res = sessionExec(t, s, jsJob("o.n = 10\nthrow new Error('boom')"))
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "Error: boom") || strings.Contains(res.Stderr, "/dev/fd/") || res.SessionState != launcher.SessionKept {
		t.Fatalf("exception: got exit %d, state %q, stderr %q, want 1, kept, its stack without the runner's frames", res.ExitCode, res.SessionState, res.Stderr)
	}
	res = sessionExec(t, s, jsJob("setTimeout(() => { throw new Error('later') }, 10)"))
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "Error: later") || res.SessionState != launcher.SessionKept {
		t.Fatalf("exception in a timer: got exit %d, state %q, stderr %q", res.ExitCode, res.SessionState, res.Stderr)
	}
	if res = sessionExec(t, s, jsJob("process.exitCode = 4")); res.ExitCode != 4 || res.SessionState != launcher.SessionKept {
		t.Fatalf("exitCode: got exit %d, state %q, want 4, kept", res.ExitCode, res.SessionState)
	}
	// A call run again (a const, a class declared anew), and names of the runner's
	// globals taken by the program: the next calls still run.
	for range 2 {
		wantState(t, sessionExec(t, s, jsJob("const c = 2; class K { m() { return 'k2' } }\nconsole.log(c, new K().m())")), launcher.SessionKept, "2 k2\n")
	}
	wantState(t, sessionExec(t, s, jsJob("const process = 1, setTimeout = 2; console.log(process)")), launcher.SessionKept, "1\n")
	// A syntax error fails the call and keeps the state.
	res = sessionExec(t, s, jsJob("let = ;"))
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "SyntaxError") || res.SessionState != launcher.SessionKept {
		t.Fatalf("syntax error: got exit %d, state %q, stderr %q", res.ExitCode, res.SessionState, res.Stderr)
	}

	// A Python call's timeout leaves node alone.
	res = sessionExec(t, s, launcher.Job{Code: "x = 0\nwhile True: pass", Timeout: time.Second})
	if !res.TimedOut || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("python timeout: got timed out %v, state %q, want true, rolled_back", res.TimedOut, res.SessionState)
	}
	wantState(t, sessionExec(t, s, jsJob("console.log(o.n)")), launcher.SessionKept, "10\n")

	// A JavaScript call's timeout: lost, said, the JavaScript state alone.
	res = sessionExec(t, s, launcher.Job{Code: "require('fs').writeFileSync('/tmp/js.txt', 'js'); for (;;) {}", Language: "javascript", Timeout: time.Second})
	if !res.TimedOut || res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" || !strings.Contains(res.Stderr, "JavaScript state was lost") {
		t.Fatalf("js timeout: got timed out %v, state %q (%q), stderr %q, want true, lost (javascript)", res.TimedOut, res.SessionState, res.LostLanguage, res.Stderr)
	}
	wantState(t, sessionExec(t, s, jsJob("console.log(typeof o, require('fs').readFileSync('/tmp/js.txt', 'utf8'))")), launcher.SessionKept, "undefined js\n")
	wantState(t, sessionExec(t, s, launcher.Job{Code: "print(x)"}), launcher.SessionKept, "41\n")

	// A call killed for memory (step by step: the kernel's OOM killer takes node, whose
	// oom_score_adj is a cell's): the same. Under gVisor the whole sandbox may go.
	sessionExec(t, s, jsJob("globalThis.g = 1"))
	res = sessionExec(t, s, jsJob("const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1))"))
	if l.Options().GVisor() && res.SessionGone() {
		t.Logf("memory, gVisor: the whole session went (stderr %q)", res.Stderr)
		sessionExec(t, s, launcher.Job{Code: "x = 41"})
	} else if !res.OOMKilled || res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" {
		t.Fatalf("memory: got oom %v, state %q (%q), exit %d, stderr %q, want true, lost (javascript)", res.OOMKilled, res.SessionState, res.LostLanguage, res.ExitCode, res.Stderr)
	}
	wantState(t, sessionExec(t, s, jsJob("console.log(typeof g)")), launcher.SessionKept, "undefined\n")
	wantState(t, sessionExec(t, s, launcher.Job{Code: "print(x)"}), launcher.SessionKept, "41\n")

	// process.exit ends node: its status, and the JavaScript state lost.
	res = sessionExec(t, s, jsJob("globalThis.g = 1; process.exit(3)"))
	if res.ExitCode != 3 || res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" {
		t.Fatalf("process.exit: got exit %d, state %q (%q), stderr %q, want 3, lost (javascript)", res.ExitCode, res.SessionState, res.LostLanguage, res.Stderr)
	}
	wantState(t, sessionExec(t, s, jsJob("console.log(typeof g)")), launcher.SessionKept, "undefined\n")

	// One call at a time, whatever the language.
	done := make(chan launcher.Result)
	go func() {
		res, _ := s.Exec(t.Context(), launcher.Job{Code: "await new Promise((r) => setTimeout(r, 2000)); console.log('first')", Language: "javascript", Timeout: 20 * time.Second})
		done <- res
	}()
	time.Sleep(time.Second)
	if _, err := s.Exec(t.Context(), bashJob("echo second")); !errors.Is(err, launcher.ErrSessionBusy) {
		t.Fatalf("a call while a JavaScript call runs: got %v, want ErrSessionBusy", err)
	}
	wantState(t, <-done, launcher.SessionKept, "first\n")

	// A cancelled call is killed at once, as a timed-out one.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(time.Second, cancel)
	if res, err := s.Exec(ctx, launcher.Job{Code: "for (;;) {}", Language: "javascript", Timeout: 60 * time.Second}); err == nil || res.SessionState != launcher.SessionLost {
		t.Fatalf("cancel: got %v, state %q, want the context's error, lost", err, res.SessionState)
	}
	// Its result went to no one (the caller went away, or run_cancel): the next
	// JavaScript call, not a Python one, says the state was lost before it.
	wantState(t, sessionExec(t, s, launcher.Job{Code: "print(x)"}), launcher.SessionKept, "41\n")
	res = sessionExec(t, s, jsJob("console.log(1)"))
	if res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" || res.Stdout != "1\n" || !strings.Contains(res.Stderr, "lost before this call") {
		t.Fatalf("after a cancel: got state %q (%q), stdout %q, stderr %q; want lost (javascript), 1, said lost before the call", res.SessionState, res.LostLanguage, res.Stdout, res.Stderr)
	}
	wantState(t, sessionExec(t, s, jsJob("console.log(2)")), launcher.SessionKept, "2\n")
}

// TestSessionNodeEndsBetweenCalls: the session's node killed, or stopped, between
// JavaScript calls (by a Python or a bash call: same user, same sandbox) is found at the
// next JavaScript call, which runs in a fresh node and says that the state was lost
// before it (lost, javascript); never a hang, nor a note that blames the call. The
// other languages' state stays.
func TestSessionNodeEndsBetweenCalls(t *testing.T) {
	l := launchertest.New(t, launcher.Options{})
	s := openSession(t, l, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})
	wantState(t, sessionExec(t, s, launcher.Job{Code: "x = 41"}), launcher.SessionKept, "")
	for _, kill := range []launcher.Job{
		{Language: "python", Code: `import os
for p in filter(str.isdigit, os.listdir("/proc")):
    if open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")[0].endswith(b"node"):
        os.kill(int(p), 9)`},
		bashJob(`for p in /proc/[0-9]*; do read -r -d '' a < $p/cmdline || true; [[ $a == *node ]] && kill -STOP ${p#/proc/}; done; true`),
	} {
		wantState(t, sessionExec(t, s, jsJob("globalThis.g = 1")), launcher.SessionKept, "")
		wantState(t, sessionExec(t, s, kill), launcher.SessionKept, "")
		res := sessionExec(t, s, launcher.Job{Code: "console.log(typeof g)", Language: "javascript", Timeout: 10 * time.Second})
		if res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" || res.Stdout != "undefined\n" || res.TimedOut ||
			!strings.Contains(res.Stderr, "lost before this call") {
			t.Fatalf("after a %s call's kill: got state %q (%q), stdout %q, timed out %v, stderr %q; want lost (javascript), undefined, said lost before the call",
				kill.Language, res.SessionState, res.LostLanguage, res.Stdout, res.TimedOut, res.Stderr)
		}
		wantState(t, sessionExec(t, s, jsJob("console.log(typeof g)")), launcher.SessionKept, "undefined\n")
		wantState(t, sessionExec(t, s, launcher.Job{Code: "print(x)"}), launcher.SessionKept, "41\n")
	}
}

// TestSessionJavaScriptLeftovers: node runs only during calls, so a timer that an
// earlier JavaScript call left unref'd (it did not hold that call) fires in the first
// later call that waits on something, and that call's result carries what the timer
// does: its output; its exception (the call fails, the stack naming the earlier call's
// <exec-N>); its process.exit, which loses the JavaScript state during that call, with
// a note that names an earlier call's leftovers as a cause. A call that waits on
// nothing runs none of it, nor does the time between calls.
func TestSessionJavaScriptLeftovers(t *testing.T) {
	l := launchertest.New(t, launcher.Options{})
	s := openSession(t, l, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})
	wait := jsJob("await new Promise((r) => setTimeout(r, 300)); console.log('waited')")

	wantState(t, sessionExec(t, s, jsJob("setTimeout(() => console.log('left by 1'), 100).unref(); console.log('one')")), launcher.SessionKept, "one\n")
	time.Sleep(200 * time.Millisecond) // due between calls
	wantState(t, sessionExec(t, s, jsJob("console.log('two')")), launcher.SessionKept, "two\n")
	wantState(t, sessionExec(t, s, wait), launcher.SessionKept, "left by 1\nwaited\n")

	wantState(t, sessionExec(t, s, jsJob("setTimeout(() => { throw new Error('left by 4') }, 100).unref()")), launcher.SessionKept, "")
	res := sessionExec(t, s, wait)
	if res.SessionState != launcher.SessionKept || res.ExitCode != 1 || res.Stdout != "waited\n" || !strings.Contains(res.Stderr, "Error: left by 4") || !strings.Contains(res.Stderr, "<exec-4>") {
		t.Fatalf("an earlier call's timer throws: got state %q, exit %d, stdout %q, stderr %q; want kept, 1, waited, the error at <exec-4>", res.SessionState, res.ExitCode, res.Stdout, res.Stderr)
	}

	wantState(t, sessionExec(t, s, jsJob("globalThis.g = 1; setTimeout(() => process.exit(7), 100).unref()")), launcher.SessionKept, "")
	res = sessionExec(t, s, wait)
	if res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" || res.ExitCode != 7 || res.Stdout != "" ||
		!strings.Contains(res.Stderr, "an earlier JavaScript call left unref'd") {
		t.Fatalf("an earlier call's timer exits: got state %q (%q), exit %d, stdout %q, stderr %q; want lost (javascript), 7, nothing, a note naming an earlier call's leftovers",
			res.SessionState, res.LostLanguage, res.ExitCode, res.Stdout, res.Stderr)
	}
	wantState(t, sessionExec(t, s, jsJob("console.log(typeof g)")), launcher.SessionKept, "undefined\n")
}
