package proxy_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

// injectLauncher is a started, checked launcher whose proxy is egresstest's
// InjectServer, with an audit log; served is as liveLauncher's.
func injectLauncher(t testing.TB) (l *launcher.Launcher, ts *egresstest.TLSServer, logs, audit *syncbuf.Buffer, served bool) {
	t.Helper()
	logs, audit = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	var srv *proxy.Server
	srv, ts = egresstest.InjectServer(t, filepath.Join(t.TempDir(), "s"), logs, audit)
	l = launchertest.New(t, launcher.Options{Egress: srv, MaxConcurrent: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := l.CheckEgress(ctx)
	if launchertest.HostUDS(t, l.Options().Runtime) {
		if err != nil {
			t.Fatalf("start-up check: %v", err)
		}
		return l, ts, logs, audit, true
	}
	if !errors.Is(err, launcher.ErrEgressChannel) {
		t.Fatalf("start-up check under runtime %q without --host-uds: got %v, want %v", l.Options().Runtime, err, launcher.ErrEgressChannel)
	}
	return l, ts, logs, audit, false
}

// TestLiveEgressInject: on the real engine, a program with a profile whose host has
// inject rules calls it with the credential set by the proxy, and can read no byte of
// it (environment, files, the CA bundle, the proxy's replies and errors); a host of the
// same profile without rules is end to end (the real server's certificate); a real
// host whose certificate does not match is refused; a redirect is the program's; an
// upgrade is refused; the audit log has the lines and no secret. An echoing endpoint
// does show the secret: that is the API's, which the operator must not name.
func TestLiveEgressInject(t *testing.T) {
	l, ts, logs, audit, served := injectLauncher(t)
	if !served {
		return
	}
	out := run(t, l, egresstest.InjectJob(ts))
	egresstest.CheckInject(t, out, ts, logs.String(), audit.String())
}

// injectSession opens a session with the profile "api" of injectLauncher's server, closed
// when the test ends; nil when the host cannot serve it (injectLauncher said why).
func injectSession(t *testing.T) (*launcher.Session, *egresstest.TLSServer) {
	t.Helper()
	l, ts, _, _, served := injectLauncher(t)
	if !served {
		return nil, nil
	}
	s, err := l.OpenSession(t.Context(), launcher.SessionOptions{Expires: time.Now().Add(time.Hour), Egress: "api"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, ts
}

// TestLiveEgressInjectSession: a session's sandbox gets the bundle too, and each call
// gets the header.
func TestLiveEgressInjectSession(t *testing.T) {
	s, ts := injectSession(t)
	if s == nil {
		return
	}
	for range 2 {
		out := sessionRun(t, s, launcher.Job{Code: `
import json, urllib.request
with urllib.request.urlopen("https://api.example.org/s", timeout=30) as r:
    print(json.dumps({"api": "%d %s" % (r.status, r.read().decode().strip())}))
`})
		want(t, out, "api", "200 ok api.example.org /s")
	}
	if seen := ts.Seen(); len(seen) != 2 || seen[1].Get("Authorization") != "Bearer "+egresstest.InjectSecret {
		t.Errorf("the server got %d requests, the last with the injected header %v; want 2, yes", len(seen), len(seen) == 2 && seen[1].Get("Authorization") != "")
	}
}

// TestLiveEgressInjectWithTools: code mode and a profile with inject rules together:
// the program calls a tool over its stream and the injected host over its channel.
func TestLiveEgressInjectWithTools(t *testing.T) {
	l, ts, _, _, served := injectLauncher(t)
	if !served {
		return
	}
	tools := &launcher.Tools{
		Catalog: []byte(`{"servers":[{"name":"echo","module":"echo","tools":[
 {"name":"echo","function":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}]}`),
		Serve: func(context.Context, []byte, int) []byte {
			return []byte(`{"result":{"content":[],"structuredContent":{"text":"hi"}}}`)
		},
	}
	out := run(t, l, launcher.Job{Egress: "api", Tools: tools, Code: `
import json, urllib.request
from mcptools import echo
out = {"tool": "ok %s" % echo.echo(text="hi")}
with urllib.request.urlopen("https://api.example.org/tools", timeout=30) as r:
    out["api"] = "ok %d %s" % (r.status, r.read().decode().strip())
print(json.dumps(out))
`})
	want(t, out, "tool", "ok {'text': 'hi'}")
	want(t, out, "api", "ok 200 ok api.example.org /tools")
	if seen := ts.Seen(); len(seen) != 1 || seen[0].Get("Authorization") != "Bearer "+egresstest.InjectSecret {
		t.Errorf("the server got %d requests; want 1 with the injected header", len(seen))
	}
}
