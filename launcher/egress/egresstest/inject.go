package egresstest

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// InjectSecret is the credential of InjectProfiles' rules: the canary the inject tests
// look for wherever the program could read.
const InjectSecret = "INJECTED-live-7e2a-credential"

// InjectProfiles: api.example.org has rules and is served by the test's server;
// plain.example.org (same server) has none; mismatch.example.org has rules, and the
// server's certificate does not name it. None is a public name: the proxy's resolver
// answers the stand-in address and its dialler takes that to the local server.
const InjectProfiles = `{"profiles": {"api": {
  "hosts": ["api.example.org", "plain.example.org", "mismatch.example.org"],
  "inject": {
    "api.example.org": {"headers": {"Authorization": "Bearer ${env:TOK}"}},
    "mismatch.example.org": {"headers": {"Authorization": "Bearer ${env:TOK}"}}
  }
}}}`

type secrets map[string]string

func (s secrets) Resolve(v string) (string, error) {
	return strings.ReplaceAll(v, "${env:TOK}", s["TOK"]), nil
}

// InjectServer is a proxy with InjectProfiles, its Channels in dir ("" for a backend
// that carries them), logging to logs and auditing to audit, whose names all lead to
// a TLSServer of the test's (returned) that the proxy trusts.
func InjectServer(t testing.TB, dir string, logs, audit io.Writer) (*proxy.Server, *TLSServer) {
	t.Helper()
	ps, err := egress.ParseProfilesSecrets([]byte(InjectProfiles), secrets{"TOK": InjectSecret})
	if err != nil {
		t.Fatal(err)
	}
	ts := NewTLSServer(t, "api.example.org", "plain.example.org")
	srv, err := proxy.New(ps, dir, "live-inject", owner.ID{}, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetResolver(Resolver{})
	srv.SetDial(Dial(ts.Listener.Addr().String()))
	srv.SetUpstreamRoots(ts.Pool)
	a, _ := proxy.OpenAudit("-", audit)
	srv.SetAudit(a)
	return srv, ts
}

// InjectJob is InjectProgram as a job with the "api" profile, given the test server's
// CA as test-ca.pem.
func InjectJob(ts *TLSServer) launcher.Job {
	return launcher.Job{Code: InjectProgram, Egress: "api", Files: []launcher.File{{Name: "test-ca.pem", Data: ts.CAPEM}}}
}

// InjectProgram is what a program with the "api" profile tries, printed as one JSON
// object; it never holds the secret, so it cannot look for it: it reports everything
// it can read that the secret could be in (its environment, every process's, the
// channel's directory with the CA bundle, /tmp, every reply and error of the proxy),
// and the test looks for the secret in that. The echoing endpoint's answer is kept
// apart, under "echo".
const InjectProgram = `
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

// CheckInject checks what InjectProgram printed (out), what the test's server got
// (ts) and the proxy's log and audit: the credential arrived in place of the program's
// own, and nowhere else (environment, files, the CA bundle, the proxy's replies and
// errors, the logs) but from the echoing endpoint; the host without rules showed its
// real certificate; the mismatch, the upgrade and another host were refused.
func CheckInject(t testing.TB, out map[string]string, ts *TLSServer, logs, audit string) {
	t.Helper()
	want := func(key, prefix string) {
		t.Helper()
		if !strings.HasPrefix(out[key], prefix) {
			t.Errorf("%s: got %q, want it to start with %q", key, out[key], prefix)
		}
	}
	for k, v := range out {
		if k != "dump" {
			t.Logf("%s: %.300s", k, v)
		}
	}
	want("api", "ok 200 ok api.example.org /user")
	want("api_issuer", "ok mcp-exec egress injection CA")
	want("plain_issuer", "ok egresstest CA")
	want("plain_default_trust", "err SSLCertVerificationError")
	want("mismatch", "err URLError: <urlopen error Tunnel connection failed: 502 egress: \"mismatch.example.org\" port 443: its certificate was refused")
	want("redirect", "ok 200 ok plain.example.org /landed")
	want("websocket", "ok alpn=http/1.1 HTTP/1.1 501 egress: protocol upgrades (websockets)")
	want("refused", "ok HTTP/1.1 403 egress denied (host_not_allowed)")
	want("bundle_env", "SSL_CERT_FILE=/egress/ca-bundle.pem REQUESTS_CA_BUNDLE=/egress/ca-bundle.pem CURL_CA_BUNDLE=/egress/ca-bundle.pem PIP_CERT=/egress/ca-bundle.pem")
	want("bundle_key", "False")
	if n, _ := strconv.Atoi(out["bundle_certs"]); n < 2 {
		t.Errorf("the bundle holds %s certificates, want the system's and the proxy's CA", out["bundle_certs"])
	}
	if out["echo"] != "Bearer "+InjectSecret {
		t.Errorf("echo: got %q, want the injected header reflected by the echoing endpoint", out["echo"])
	}
	if !strings.Contains(out["dump"], "BEGIN CERTIFICATE") || !strings.Contains(out["dump"], "HTTPS_PROXY") {
		t.Errorf("the dump lacks the bundle or the environment: %.500s", out["dump"])
	}
	rest := map[string]string{}
	for k, v := range out {
		if k != "echo" {
			rest[k] = v
		}
	}
	all, _ := json.Marshal(rest)
	if strings.Contains(string(all), InjectSecret) {
		t.Errorf("the program read the secret outside the echoing endpoint")
	}
	// The server got the injected header, never the program's, and not after the
	// redirect to the host without rules.
	for _, h := range ts.Seen() {
		switch got := h.Get("Authorization"); h.Get("Host") {
		case "api.example.org":
			if got != "Bearer "+InjectSecret {
				t.Errorf("api.example.org got Authorization %q, want the injected one", got)
			}
		default:
			if strings.Contains(got, InjectSecret) {
				t.Errorf("%s got the secret", h.Get("Host"))
			}
		}
	}
	for _, s := range []string{`"event":"request","profile":"api"`, `"path":"/user"`, `"injected":["Authorization"]`, `"reason":"upstream_tls"`, `"reason":"upgrade_refused"`} {
		if !strings.Contains(audit, s) {
			t.Errorf("audit log lacks %s:\n%s", s, audit)
		}
	}
	for _, log := range []string{logs, audit} {
		if strings.Contains(log, InjectSecret) || strings.Contains(log, "the-programs-own") {
			t.Errorf("a log holds a header value:\n%s", log)
		}
	}
}
