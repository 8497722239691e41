package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// liveInjectProfiles: api.example.org has rules and is served by the test's server;
// plain.example.org (same server) has none; mismatch.example.org has rules, and the
// server's certificate does not name it. None is a public name: the proxy's resolver
// answers the stand-in address and its dialler takes that to the local server.
const liveInjectProfiles = `{"profiles": {"api": {
  "hosts": ["api.example.org", "plain.example.org", "mismatch.example.org"],
  "inject": {
    "api.example.org": {"headers": {"Authorization": "Bearer ${env:TOK}"}},
    "mismatch.example.org": {"headers": {"Authorization": "Bearer ${env:TOK}"}}
  }
}}}`

// injectLauncher is a started, checked launcher whose proxy has liveInjectProfiles
// and an audit log; served is as liveLauncher's.
func injectLauncher(t testing.TB) (l *launcher.Launcher, ts *egresstest.TLSServer, logs, audit *syncbuf.Buffer, served bool) {
	t.Helper()
	ps, err := egress.ParseProfilesSecrets([]byte(liveInjectProfiles), envSecrets{"TOK": injectSecret})
	if err != nil {
		t.Fatal(err)
	}
	ts = egresstest.NewTLSServer(t, "api.example.org", "plain.example.org")
	logs, audit = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	srv, err := proxy.New(ps, filepath.Join(t.TempDir(), "s"), "live-inject", owner.ID{}, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetResolver(egresstest.Resolver{})
	srv.SetDial(egresstest.Dial(ts.Listener.Addr().String()))
	srv.SetUpstreamRoots(ts.Pool)
	a, _ := proxy.OpenAudit("-", audit)
	srv.SetAudit(a)
	l = launchertest.New(t, launcher.Options{Egress: srv, MaxConcurrent: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err = l.CheckEgress(ctx)
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

// injectProgram is what a program with the "api" profile tries, printed as one JSON
// object; it never holds the secret, so it cannot look for it: it reports everything
// it can read that the secret could be in (its environment, every process's, the
// channel's directory with the CA bundle, /tmp, every reply and error of the proxy),
// and the test looks for the secret in that. The echoing endpoint's answer is kept
// apart, under "echo".
const injectProgram = `
import glob, json, os, socket, ssl, urllib.request
out, seen = {}, []
def attempt(name, f):
    try:
        out[name] = "ok " + str(f())
    except Exception as e:
        out[name] = "err %s: %s" % (type(e).__name__, e)
    seen.append(out[name])

# The bundle (SSL_CERT_FILE) and the test server's own CA, for a redirect that leaves
# the injected host for the one without rules, which shows its real certificate.
both = ssl.create_default_context()
both.load_verify_locations("test-ca.pem")

def api(path, **headers):
    req = urllib.request.Request("https://api.example.org" + path, headers=headers)
    with urllib.request.urlopen(req, timeout=30, context=both) as r:
        return "%d %s" % (r.status, r.read().decode().strip())

def raw(target, payload=b""):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    f = s.makefile("rb")
    head = b""
    while True:
        line = f.readline()
        head += line
        if line in (b"\r\n", b""):
            break
    if not head.startswith(b"HTTP/1.1 200"):
        return head.decode() + f.read().decode()
    return s, f

def issuer(host, cafile):
    s, _ = raw(host + ":443")
    ctx = ssl.create_default_context(cafile=cafile) if cafile else ssl.create_default_context()
    t = ctx.wrap_socket(s, server_hostname=host)
    iss = dict(x[0] for x in t.getpeercert()["issuer"])["commonName"]
    t.close()
    return iss

def websocket():
    s, _ = raw("api.example.org:443")
    ctx = ssl.create_default_context()
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    t = ctx.wrap_socket(s, server_hostname="api.example.org")
    alpn = t.selected_alpn_protocol()
    t.sendall(b"GET /ws HTTP/1.1\r\nHost: api.example.org\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    data = b""
    while True:
        b = t.recv(4096)
        if not b:
            break
        data += b
    return "alpn=%s %s" % (alpn, data.decode())

attempt("api", lambda: api("/user", Authorization="Bearer the-programs-own"))
attempt("api_issuer", lambda: issuer("api.example.org", None))
attempt("plain_issuer", lambda: issuer("plain.example.org", "test-ca.pem"))
attempt("plain_default_trust", lambda: issuer("plain.example.org", None))
def api_host(h):
    with urllib.request.urlopen("https://%s/x" % h, timeout=30) as r:
        return r.status
attempt("mismatch", lambda: api_host("mismatch.example.org"))
attempt("redirect", lambda: api("/redirect?to=https://plain.example.org/landed"))
attempt("websocket", websocket)
attempt("refused", lambda: raw("elsewhere.example.org:443"))
try:
    with urllib.request.urlopen("https://api.example.org/headers", timeout=30) as r:
        out["echo"] = json.loads(r.read()).get("Authorization", [""])[0]
except Exception as e:
    out["echo"] = "err %s" % e

dump = {"env": dict(os.environ)}
for p in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        dump[p] = open(p, "rb").read().decode("latin-1")
    except OSError:
        pass
for root in ("/egress", "/tmp", "."):
    for dirpath, dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                dump[p] = open(p, "rb").read().decode("latin-1")
            except OSError as e:
                dump[p] = "unreadable %s" % e
out["bundle_env"] = " ".join("%s=%s" % (k, os.environ.get(k)) for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT"))
out["dump"] = json.dumps(dump)
out["bundle_certs"] = str(open(os.environ["SSL_CERT_FILE"]).read().count("BEGIN CERTIFICATE"))
out["bundle_key"] = str("PRIVATE KEY" in open(os.environ["SSL_CERT_FILE"]).read())
print(json.dumps(out))
`

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
	out := run(t, l, launcher.Job{Code: injectProgram, Egress: "api", Files: []launcher.File{{Name: "test-ca.pem", Data: ts.CAPEM}}})
	for k, v := range out {
		if k != "dump" {
			t.Logf("%s: %.300s", k, v)
		}
	}
	want(t, out, "api", "ok 200 ok api.example.org /user")
	want(t, out, "api_issuer", "ok mcp-exec egress injection CA")
	want(t, out, "plain_issuer", "ok egresstest CA")
	want(t, out, "plain_default_trust", "err SSLCertVerificationError")
	want(t, out, "mismatch", "err URLError: <urlopen error Tunnel connection failed: 502 egress: \"mismatch.example.org\" port 443: its certificate was refused")
	want(t, out, "redirect", "ok 200 ok plain.example.org /landed")
	want(t, out, "websocket", "ok alpn=http/1.1 HTTP/1.1 501 egress: protocol upgrades (websockets)")
	want(t, out, "refused", "ok HTTP/1.1 403 egress denied (host_not_allowed)")
	want(t, out, "bundle_env", "SSL_CERT_FILE=/egress/ca-bundle.pem REQUESTS_CA_BUNDLE=/egress/ca-bundle.pem CURL_CA_BUNDLE=/egress/ca-bundle.pem PIP_CERT=/egress/ca-bundle.pem")
	want(t, out, "bundle_key", "False")
	if n, _ := strconv.Atoi(out["bundle_certs"]); n < 2 {
		t.Errorf("the bundle holds %s certificates, want the system's and the proxy's CA", out["bundle_certs"])
	}
	if out["echo"] != "Bearer "+injectSecret {
		t.Errorf("echo: got %q, want the injected header reflected by the echoing endpoint", out["echo"])
	}
	if !strings.Contains(out["dump"], "BEGIN CERTIFICATE") || !strings.Contains(out["dump"], "HTTPS_PROXY") {
		t.Errorf("the dump lacks the bundle or the environment: %.500s", out["dump"])
	}
	delete(out, "echo")
	all, _ := json.Marshal(out)
	if strings.Contains(string(all), injectSecret) {
		t.Errorf("the program read the secret outside the echoing endpoint")
	}

	// The server got the injected header, never the program's, and not after the
	// redirect to the host without rules.
	for _, h := range ts.Seen() {
		switch got := h.Get("Authorization"); h.Get("Host") {
		case "api.example.org":
			if got != "Bearer "+injectSecret {
				t.Errorf("api.example.org got Authorization %q, want the injected one", got)
			}
		default:
			if strings.Contains(got, injectSecret) {
				t.Errorf("%s got the secret", h.Get("Host"))
			}
		}
	}
	for _, s := range []string{`"event":"request","profile":"api"`, `"path":"/user"`, `"injected":["Authorization"]`, `"reason":"upstream_tls"`, `"reason":"upgrade_refused"`} {
		if !strings.Contains(audit.String(), s) {
			t.Errorf("audit log lacks %s:\n%s", s, audit.String())
		}
	}
	for _, log := range []string{logs.String(), audit.String()} {
		if strings.Contains(log, injectSecret) || strings.Contains(log, "the-programs-own") {
			t.Errorf("a log holds a header value:\n%s", log)
		}
	}
}

// TestLiveEgressInjectSession: a session's sandbox gets the bundle too, and each call
// gets the header.
func TestLiveEgressInjectSession(t *testing.T) {
	l, ts, _, _, served := injectLauncher(t)
	if !served {
		return
	}
	s, err := l.OpenSession(t.Context(), launcher.SessionOptions{Expires: time.Now().Add(time.Hour), Egress: "api"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		out := sessionRun(t, s, launcher.Job{Code: `
import json, urllib.request
with urllib.request.urlopen("https://api.example.org/s", timeout=30) as r:
    print(json.dumps({"api": "%d %s" % (r.status, r.read().decode().strip())}))
`})
		want(t, out, "api", "200 ok api.example.org /s")
	}
	if seen := ts.Seen(); len(seen) != 2 || seen[1].Get("Authorization") != "Bearer "+injectSecret {
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
	if seen := ts.Seen(); len(seen) != 1 || seen[0].Get("Authorization") != "Bearer "+injectSecret {
		t.Errorf("the server got %d requests; want 1 with the injected header", len(seen))
	}
}
