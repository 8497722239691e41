package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/probe"
)

// sessionRunner runs each probe as the next call of one session.
type sessionRunner struct{ s *launcher.Session }

func (r sessionRunner) Run(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	return r.s.Exec(ctx, job)
}

// networkProbes runs the sandbox contract's network probes (no interface but
// loopback, no TCP or UDP out, no DNS, no host address, no raw socket) as calls of s:
// a profile opens a channel to the proxy, never a network.
func networkProbes(t *testing.T, l *launcher.Launcher, s *launcher.Session) {
	t.Helper()
	p := probe.ParamsOf(l.Options())
	p.CanaryName, p.CanaryValue, p.Token = "MCP_EXEC_PROBE_UNUSED", "unused", "egress"
	n := 0
	for _, pr := range probe.All(p) {
		if !strings.HasPrefix(pr.Name, "network_") && pr.Name != "raw_sockets_denied" {
			continue
		}
		n++
		if res, _, err := probe.Run(t.Context(), sessionRunner{s}, l, pr); err != nil {
			t.Errorf("%s in a session: %v\n  stdout: %s\n  stderr: %s", pr.Name, err, res.Stdout, res.Stderr)
		}
	}
	if n != 6 {
		t.Errorf("ran %d network probes, want 6 (the probe set changed: update this test)", n)
	}
}

func sessionRun(t *testing.T, s *launcher.Session, job launcher.Job) map[string]string {
	t.Helper()
	if job.Timeout == 0 {
		job.Timeout = 90 * time.Second
	}
	res, err := s.Exec(t.Context(), job)
	if err != nil {
		t.Fatalf("session exec: %v", err)
	}
	if res.ExitCode != 0 || res.SessionState != launcher.SessionKept {
		t.Fatalf("exit %d, state %q\nstdout: %s\nstderr: %s", res.ExitCode, res.SessionState, res.Stdout, res.Stderr)
	}
	return decode(t, res)
}

// opened is the channel directory the recorder saw since the last look, or "".
func opened(rec *recorder) string {
	select {
	case dir := <-rec.opened:
		return dir
	default:
		return ""
	}
}

func decode(t *testing.T, res launcher.Result) map[string]string {
	t.Helper()
	var out map[string]string
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("output %q: %v (stderr %s)", res.Stdout, err, res.Stderr)
	}
	return out
}

func gone(t *testing.T, dir, when string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(dir, proxy.SocketName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: the channel's socket: got %v, want it gone", when, err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: the channel's directory: got %v, want it gone", when, err)
	}
}

// sessionPrelude defines what the session's later calls use: the host, TLS verified
// against the host's own trust store, and attempt/head.
var sessionPrelude = fmt.Sprintf(`
import json, os, socket, ssl, urllib.request
HOST, PATH = %q, %q
CTX = ssl.create_default_context(cafile="host-ca.pem")
def attempt(f):
    try:
        return "ok " + str(f())
    except Exception as e:
        return "err %%s: %%s" %% (type(e).__name__, e)
def head(host=HOST):
    req = urllib.request.Request("https://" + host + PATH, method="HEAD")
    with urllib.request.urlopen(req, context=CTX, timeout=30) as r:
        return r.status
`, liveHost, livePath)

// TestLiveEgressSession: a session created with a profile reaches the profile's host
// through the proxy in every call, TLS verified end to end; any other host gets 403;
// the caps count per call (the "tiny" profile allows one connection per call, and the
// second call gets one again); the session's interpreter keeps its state between
// calls; a lost interpreter's restart gets a channel of its own and the old one goes;
// the network probes pass in the session as in a sandbox without a profile; a call
// naming a profile is refused; close removes the channel's socket. A session created
// without a profile, on the same launcher, has no channel, no relay and no network.
// The launcher's close ends the channel of a session still open.
func TestLiveEgressSession(t *testing.T) {
	l, rec, logs, served := liveLauncher(t)
	exp := time.Now().Add(time.Hour)
	if !served {
		if _, err := l.OpenSession(t.Context(), launcher.SessionOptions{Expires: exp, Egress: "tiny"}); !errors.Is(err, launcher.ErrEgressUnchecked) {
			t.Errorf("a session with a profile after the refusal: got %v, want %v", err, launcher.ErrEgressUnchecked)
		}
		return
	}
	t0 := time.Now()
	s, err := l.OpenSession(t.Context(), launcher.SessionOptions{Expires: exp, Egress: "tiny"})
	if err != nil {
		t.Fatalf("session with a profile: %v", err)
	}
	defer s.Close()
	t.Logf("session_create with a profile: %v", time.Since(t0).Round(time.Millisecond))
	dir := opened(rec)
	if dir == "" {
		t.Fatal("no channel opened for the session")
	}

	out := sessionRun(t, s, launcher.Job{Files: []launcher.File{egresstest.HostTrust(t)}, Code: sessionPrelude + `
x = 41
print(json.dumps({"env": os.environ.get("HTTPS_PROXY"), "sock": str(os.path.exists("/egress/proxy.sock")),
                  "first": attempt(head), "second": attempt(head)}))
`})
	want(t, out, "env", "http://127.0.0.1:3128")
	want(t, out, "sock", "True")
	want(t, out, "first", "ok 200")
	want(t, out, "second", "err URLError: <urlopen error Tunnel connection failed: 403 egress denied (connection_limit)")

	out = sessionRun(t, s, launcher.Job{Code: `
print(json.dumps({"x": str(x + 1), "other_host": attempt(lambda: head("example.com")), "again": attempt(head),
                  "direct": attempt(lambda: socket.create_connection(("151.101.2.132", 443), timeout=5))}))
`})
	want(t, out, "x", "42")
	want(t, out, "other_host", "err URLError: <urlopen error Tunnel connection failed: 403 egress denied (host_not_allowed)")
	want(t, out, "again", "ok 200") // the caps were reset for this call
	want(t, out, "direct", "err OSError: [Errno 101] Network is unreachable")

	if _, err := s.Exec(t.Context(), launcher.Job{Code: "pass", Egress: "deb"}); !errors.Is(err, launcher.ErrSessionEgress) {
		t.Errorf("a call in the session naming a profile: got %v, want %v", err, launcher.ErrSessionEgress)
	}

	// The interpreter is lost: the next call starts a new sandbox, with a new channel
	// for the same profile, and the old channel goes.
	res, err := s.Exec(t.Context(), launcher.Job{Code: "import os\nos.kill(os.getppid(), 9)\nos._exit(3)", Timeout: time.Minute})
	if err != nil || res.SessionState != launcher.SessionLost {
		t.Fatalf("killing the holder: got state %q, err %v, want lost", res.SessionState, err)
	}
	gone(t, dir, "after the interpreter was lost")
	out = sessionRun(t, s, launcher.Job{Files: []launcher.File{egresstest.HostTrust(t)}, Code: sessionPrelude + `
print(json.dumps({"x": str("x" in globals()), "head": attempt(head)}))
`})
	want(t, out, "x", "False")
	want(t, out, "head", "ok 200")
	restarted := opened(rec)
	if restarted == "" || restarted == dir {
		t.Fatalf("after the restart: channel %q, want a new one (the first was %q)", restarted, dir)
	}

	networkProbes(t, l, s)
	s.Close()
	gone(t, restarted, "after close")
	if _, err := s.Exec(t.Context(), launcher.Job{Code: "pass"}); !errors.Is(err, launcher.ErrSessionClosed) {
		t.Errorf("exec after close: got %v, want %v", err, launcher.ErrSessionClosed)
	}
	if got := logs.String(); !strings.Contains(got, `"profile":"tiny","method":"CONNECT","host":"`+liveHost+`"`) {
		t.Errorf("proxy log lacks the session's allowed connection:\n%s", got)
	}

	// Without a profile: no channel, no relay, no proxy variables, no network.
	plain, err := l.OpenSession(t.Context(), launcher.SessionOptions{Expires: exp})
	if err != nil {
		t.Fatalf("session without a profile: %v", err)
	}
	defer plain.Close()
	if dir := opened(rec); dir != "" {
		t.Errorf("a session without a profile opened channel %s", dir)
	}
	wantNoEgress(t, sessionRun(t, plain, launcher.Job{Code: noEgressProgram}))
	networkProbes(t, l, plain)

	// The launcher's Close (the server's shutdown) takes a session's channel with it,
	// though nobody closed the session.
	if _, err := l.OpenSession(t.Context(), launcher.SessionOptions{Expires: exp, Egress: "deb"}); err != nil {
		t.Fatalf("a last session with a profile: %v", err)
	}
	last := opened(rec)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("closing the launcher: %v", err)
	}
	if last == "" {
		t.Fatal("no channel opened for the last session")
	}
	gone(t, last, "after the launcher's close")
}
