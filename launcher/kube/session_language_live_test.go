package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// liveSessionLanguages: bash and JavaScript calls in a session whose every call is its
// own attach and seal (exec runs one call): bash keeps its directory, variables and
// functions from one call to the next and a timeout rolls them back; JavaScript keeps
// a const and a function in its node process, a timeout loses the JavaScript state
// alone (said so) with Python's state and the files intact, and the next JavaScript
// call starts a fresh node; a Python timeout leaves node alone. The Docker tests of
// launcher/session_language_test.go cover the rest of the languages' contract; this
// is what differs on Kubernetes: the stream between calls.
func liveSessionLanguages(t *testing.T, exec func(launcher.Job) launcher.Result) {
	t.Helper()
	bash := func(code string) launcher.Job { return launcher.Job{Code: code, Language: "bash"} }
	js := func(code string) launcher.Job { return launcher.Job{Code: code, Language: "javascript"} }

	wantLiveState(t, exec(launcher.Job{Code: "x = 41\nopen('/tmp/py.txt', 'w').write('py')"}), launcher.SessionKept, "")
	wantLiveState(t, exec(bash("mkdir -p /tmp/work && cd /tmp/work; y=7; greet() { echo \"hi $1\"; }")), launcher.SessionKept, "")
	wantLiveState(t, exec(bash(`echo "$PWD $y"; greet you`)), launcher.SessionKept, "/tmp/work 7\nhi you\n")
	res := exec(launcher.Job{Code: "y=0; cd /; while :; do :; done", Language: "bash", Timeout: 2 * time.Second})
	if !res.TimedOut || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("bash timeout: got timed out %v, state %q (stderr %q), want true, rolled_back", res.TimedOut, res.SessionState, res.Stderr)
	}
	wantLiveState(t, exec(bash(`echo "$PWD $y"; greet again`)), launcher.SessionKept, "/tmp/work 7\nhi again\n")

	wantLiveState(t, exec(js("const c = 1; function f() { return c + 1 }")), launcher.SessionKept, "")
	wantLiveState(t, exec(js("console.log(c, f(), require('fs').readFileSync('/tmp/py.txt', 'utf8'))")), launcher.SessionKept, "1 2 py\n")

	// A Python call's timeout leaves node alone.
	res = exec(launcher.Job{Code: "x = 0\nwhile True: pass", Timeout: 2 * time.Second})
	if !res.TimedOut || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("python timeout: got timed out %v, state %q (stderr %q), want true, rolled_back", res.TimedOut, res.SessionState, res.Stderr)
	}
	wantLiveState(t, exec(js("console.log(f())")), launcher.SessionKept, "2\n")

	// A JavaScript call's timeout: lost, for JavaScript alone.
	res = exec(launcher.Job{Code: "require('fs').writeFileSync('/tmp/js.txt', 'js'); for (;;) {}", Language: "javascript", Timeout: 2 * time.Second})
	if !res.TimedOut || res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" || res.SessionGone() || !strings.Contains(res.Stderr, "JavaScript state was lost") {
		t.Fatalf("js timeout: got timed out %v, state %q (%q), stderr %q, want true, lost (javascript)", res.TimedOut, res.SessionState, res.LostLanguage, res.Stderr)
	}
	wantLiveState(t, exec(js("console.log(typeof f, require('fs').readFileSync('/tmp/js.txt', 'utf8'))")), launcher.SessionKept, "undefined js\n")
	wantLiveState(t, exec(launcher.Job{Code: "print(x, open('/tmp/py.txt').read())"}), launcher.SessionKept, "41 py\n")
	wantLiveState(t, exec(bash(`echo "$PWD $y"`)), launcher.SessionKept, "/tmp/work 7\n")
}

// TestLiveSessionLanguages: bash and JavaScript in a session held by one replica
// (liveSessionLanguages).
func TestLiveSessionLanguages(t *testing.T) {
	l, _, _ := testLauncher(t, launcher.Options{})
	ctx := t.Context()
	s, err := l.OpenSession(ctx, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatalf("opening a session: %v", err)
	}
	defer s.Close()
	liveSessionLanguages(t, func(job launcher.Job) launcher.Result { return liveSessionExec(t, s, job) })
}

// TestLiveSharedSessionLanguages: the same in a shared session, its calls served by two
// replicas in turn (each call an attach of its own, by either): a JavaScript call's
// loss keeps the session's pod, the node process one replica started serves the
// other's calls, and a cancelled call's loss is said by the next JavaScript call on the
// other replica.
func TestLiveSharedSessionLanguages(t *testing.T) {
	oa, ob := launcher.Options{}, launcher.Options{}
	oa.Instance, ob.Instance = testInstance(t)+"-a", testInstance(t)+"-b"
	la, ba, admin := testLauncherWith(t, Options{}, oa)
	lb, bb, _ := testLauncherWith(t, Options{}, ob)
	log := zerolog.New(zerolog.NewTestWriter(t))
	reps := []replica{{NewSessionStore(ba, log), la}, {NewSessionStore(bb, log), lb}}
	handle, owner := testHandle(), "oauth https://issuer.example alice"
	if _, err := reps[0].Create(t.Context(), handle, owner, time.Minute, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("creating on A: %v", err)
	}
	defer reps[0].Close(context.Background(), handle, owner)
	pods := sharedPods(t, admin, handle)
	n := 0
	liveSessionLanguages(t, func(job launcher.Job) launcher.Result {
		t.Helper()
		if job.Timeout == 0 {
			job.Timeout = 30 * time.Second
		}
		r := reps[n%2]
		n++
		res, _, err := r.Exec(t.Context(), handle, owner, job)
		if err != nil {
			t.Fatalf("exec %.60q on replica %d: %v", job.Code, n%2, err)
		}
		return res
	})
	// A JavaScript call cancelled on one replica (its caller went away): its result,
	// which said the JavaScript state was lost, reached no one, and the session's next
	// JavaScript call, served by the other replica, says it.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(2*time.Second, cancel)
	if res, _, err := reps[n%2].Exec(ctx, handle, owner, launcher.Job{Code: "globalThis.g = 1; for (;;) {}", Language: "javascript", Timeout: time.Minute}); err == nil || res.SessionState != launcher.SessionLost {
		t.Fatalf("cancel on replica %d: got %v, state %q, want the context's error, lost", n%2, err, res.SessionState)
	}
	n++
	res, _, err := reps[n%2].Exec(t.Context(), handle, owner, launcher.Job{Code: "console.log(typeof g)", Language: "javascript", Timeout: 30 * time.Second})
	if err != nil || res.SessionState != launcher.SessionLost || res.LostLanguage != "javascript" || res.Stdout != "undefined\n" || !strings.Contains(res.Stderr, "lost before this call") {
		t.Fatalf("after a cancel, on replica %d: got %v, state %q (%q), stdout %q, stderr %q; want lost (javascript), undefined, said lost before the call",
			n%2, err, res.SessionState, res.LostLanguage, res.Stdout, res.Stderr)
	}
	if got := sharedPods(t, admin, handle); !slices.Equal(got, pods) || len(got) != 1 {
		t.Fatalf("session pods: got %v, want the same one, %v", got, pods)
	}
}
