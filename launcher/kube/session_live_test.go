package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// liveSessionExec runs job in s and fails the test on an infrastructure error.
func liveSessionExec(t *testing.T, s *launcher.Session, job launcher.Job) launcher.Result {
	t.Helper()
	if job.Timeout == 0 {
		job.Timeout = 30 * time.Second
	}
	res, err := s.Exec(t.Context(), job)
	if err != nil {
		t.Fatalf("exec %.60q: %v", job.Code, err)
	}
	return res
}

func wantLiveState(t *testing.T, res launcher.Result, state, stdout string) {
	t.Helper()
	if res.SessionState != state || res.Stdout != stdout {
		t.Fatalf("got state %q, stdout %q (exit %d, timed out %v, stderr %q), want state %q, stdout %q",
			res.SessionState, res.Stdout, res.ExitCode, res.TimedOut, res.Stderr, state, stdout)
	}
}

// sessionPods lists the instance's pods that carry the session expiry label.
func sessionPods(t *testing.T, admin clients, instance string) map[string]string {
	t.Helper()
	list, err := admin.CoreV1().Pods(sandboxNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: backend.LabelInstance + "=" + instance + "," + launcher.LabelSessionExpires})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.Labels[launcher.LabelSessionExpires]
		}
	}
	return out
}

// TestLiveSession: a session on the Kubernetes backend, as the server's ServiceAccount
// (so the Role and the admission policy of docs/deploy/kubernetes admit its pod): one pod,
// labelled with the expiry and nothing of the handle, holds the interpreter across
// calls through the sealed attach stream; a variable and a file in /tmp live from one
// call to the next; a timeout rolls the interpreter back; a second call while one runs
// is busy; Close deletes the pod (testLauncher's cleanup checks none is left).
func TestLiveSession(t *testing.T) {
	l, _, admin := testLauncher(t, launcher.Options{})
	liveSession(t, l, admin)
}

// TestLiveGVisorSession: the same under the RuntimeClass gvisor. The server does not
// offer sessions under gVisor yet (an OOM kill there may take the whole sandbox:
// docs/sessions.md); this shows what the launcher does there.
func TestLiveGVisorSession(t *testing.T) {
	l := gvisorLauncher(t, gvisorRuntimeClass, launcher.Options{Pids: gvisorPids})
	liveSession(t, l, mustClients(adminConfig(t)))
}

func liveSession(t *testing.T, l *launcher.Launcher, admin clients) {
	inst := l.Options().Instance
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := l.OpenSession(ctx, launcher.SessionOptions{Expires: expires})
	if err != nil {
		t.Fatalf("opening a session: %v", err)
	}
	defer s.Close()
	pods := sessionPods(t, admin, inst)
	if len(pods) != 1 {
		t.Fatalf("session pods: got %v, want one", pods)
	}
	for _, v := range pods {
		if v != strconv.FormatInt(expires.Unix(), 10) {
			t.Fatalf("expiry label: got %q, want %d", v, expires.Unix())
		}
	}

	wantLiveState(t, liveSessionExec(t, s, launcher.Job{Code: "x = 41"}), launcher.SessionKept, "")
	wantLiveState(t, liveSessionExec(t, s, launcher.Job{Code: "print(x + 1)"}), launcher.SessionKept, "42\n")
	wantLiveState(t, liveSessionExec(t, s, launcher.Job{Code: "open('note.txt', 'w').write('from call 3')"}), launcher.SessionKept, "")
	wantLiveState(t, liveSessionExec(t, s, launcher.Job{Code: "print(open('note.txt').read())"}), launcher.SessionKept, "from call 3\n")

	res := liveSessionExec(t, s, launcher.Job{Code: "x = 0\nwhile True: pass", Timeout: 2 * time.Second})
	if !res.TimedOut || res.SessionState != launcher.SessionRolledBack {
		t.Fatalf("timeout: got timed out %v, state %q (stderr %q), want true, rolled_back", res.TimedOut, res.SessionState, res.Stderr)
	}
	wantLiveState(t, liveSessionExec(t, s, launcher.Job{Code: "print(x)"}), launcher.SessionKept, "41\n")

	// Busy: a second call while one runs.
	done := make(chan launcher.Result, 1)
	go func() {
		r, _ := s.Exec(t.Context(), launcher.Job{Code: "import time\ntime.sleep(3)\nprint('first')", Timeout: 30 * time.Second})
		done <- r
	}()
	time.Sleep(1500 * time.Millisecond)
	if _, err := s.Exec(t.Context(), launcher.Job{Code: "print('second')", Timeout: 10 * time.Second}); !errors.Is(err, launcher.ErrSessionBusy) {
		t.Fatalf("second call: got %v, want ErrSessionBusy", err)
	}
	wantLiveState(t, <-done, launcher.SessionKept, "first\n")
	if got := sessionPods(t, admin, inst); len(got) != 1 {
		t.Fatalf("session pods after the calls: got %v, want the same one", got)
	}

	s.Close()
	if _, err := s.Exec(t.Context(), launcher.Job{Code: "print(1)", Timeout: 10 * time.Second}); !errors.Is(err, launcher.ErrSessionClosed) {
		t.Fatalf("after Close: got %v, want ErrSessionClosed", err)
	}
	assertNoPods(t, admin, inst)
}

// TestLiveSessionOutputNotOnNode: what a session's calls print and return does not reach
// the node's disk (TestLiveOutputNotOnNode for one-shot pods): two calls, each printing
// a marker the program makes, the second also returning a file holding a third; then,
// the session's pod still there, its container log holds at least as many bytes as
// the output (sealed), and no file of the node's state holds a marker.
func TestLiveSessionOutputNotOnNode(t *testing.T) {
	l, _, admin := testLauncher(t, launcher.Options{})
	state := nodeState(t)
	rnd := make([]byte, 16)
	_, _ = rand.Read(rnd)
	seed := hex.EncodeToString(rnd)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := l.OpenSession(ctx, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatalf("opening a session: %v", err)
	}
	defer s.Close()
	r1 := liveSessionExec(t, s, launcher.Job{Code: fmt.Sprintf("s = %q.upper()\nprint('mcp-exec-sess1-' + s)", seed)})
	r2 := liveSessionExec(t, s, launcher.Job{Code: fmt.Sprintf(`import os
print('mcp-exec-sess2-' + s)
os.makedirs(%q, exist_ok=True)
open(%q + '/m.txt', 'w').write('mcp-exec-sessf-' + s)`, launcher.OutputDir, launcher.OutputDir)})
	up := strings.ToUpper(seed)
	markers := []string{"mcp-exec-sess1-" + up, "mcp-exec-sess2-" + up, "mcp-exec-sessf-" + up}
	if r1.Stdout != markers[0]+"\n" || r2.Stdout != markers[1]+"\n" || len(r2.Files) != 1 || string(r2.Files[0].Data) != markers[2] {
		t.Fatalf("the output did not come back: %q, %q, files %d", r1.Stdout, r2.Stdout, len(r2.Files))
	}
	// The container log is written a line at a time (CRI's format), and sealed output is
	// random bytes: the markers' ciphertext reaches the file only once a byte 0x0a
	// follows it, which 143 bytes lack more often than not. A third call's 20,000 sealed
	// bytes hold one almost surely (the chance of none is e^-78).
	liveSessionExec(t, s, launcher.Job{Code: "print('p' * 20000)"})
	pods := sessionPods(t, admin, l.Options().Instance)
	if len(pods) != 1 {
		t.Fatalf("session pods: %v, want one", pods)
	}
	var id string
	for id = range pods {
	}
	want := int64(len(r1.Stdout) + len(r2.Stdout) + len(markers[2]))
	var logs []string
	var logged int64
	for deadline := time.Now().Add(10 * time.Second); logged < want && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		logs, _ = filepath.Glob(filepath.Join(state, "podlogs", sandboxNamespace+"_"+id+"_*", containerName, "*.log"))
		logged = 0
		for _, f := range logs {
			if st, err := os.Stat(f); err == nil {
				logged += st.Size()
			}
		}
	}
	if logged < want {
		t.Fatalf("the session pod's container log: got %v, %d bytes; want at least the %d bytes of its output (else the search proves nothing)", logs, logged, want)
	}
	var found []string
	for _, root := range []string{state, "/var/log/containers", "/var/log/pods"} {
		f, _ := filesHolding(t, root, markers...)
		found = append(found, f...)
	}
	if len(found) > 0 {
		t.Errorf("a session's output is on the node's disk, in %v", found)
	}
}
