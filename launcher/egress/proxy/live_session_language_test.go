package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
)

// egressBash reaches a host of the profile with curl (the environment's proxy and CA
// bundle) and one outside it, then shows all it can read that a secret could be in.
const egressBash = `echo "allowed: $(curl -sS https://api.example.org/bash)"
echo "other: $(curl -sS https://other.example.com/bash 2>&1) (exit $?)"
env; cat "$SSL_CERT_FILE"`

// egressJS does the same from node, which reads no proxy variable: a CONNECT to the
// sandbox's proxy by hand, then TLS over it against the environment's CA bundle.
const egressJS = `const net = require('net'), tls = require('tls'), fs = require('fs');
const tunnel = (host) => new Promise((resolve, reject) => {
  const s = net.connect(3128, '127.0.0.1', () => s.write('CONNECT ' + host + ':443 HTTP/1.1\r\nHost: ' + host + ':443\r\n\r\n'));
  let head = '';
  s.on('error', reject);
  s.on('data', function read(d) {
    head += d.toString('latin1');
    if (!head.includes('\r\n\r\n')) return;
    s.removeListener('data', read);
    resolve({status: head.split('\r\n')[0], socket: s});
  });
});
async function get(host, path) {
  const t = await tunnel(host);
  if (!t.status.includes(' 200')) { t.socket.destroy(); return 'refused ' + t.status; }
  const c = tls.connect({socket: t.socket, servername: host, ca: fs.readFileSync(process.env.SSL_CERT_FILE)});
  c.write('GET ' + path + ' HTTP/1.1\r\nHost: ' + host + '\r\nConnection: close\r\n\r\n');
  let r = '';
  for await (const d of c) r += d;
  return r.split('\r\n')[0] + ' ' + r.split('\r\n\r\n')[1].trim();
}
console.log('allowed: ' + await get('api.example.org', '/js'));
console.log('other: ' + await get('other.example.com', '/js'));
console.log(JSON.stringify(process.env), fs.readFileSync(process.env.SSL_CERT_FILE, 'utf8'));`

// TestLiveEgressSessionLanguages: in a session with a profile, bash (curl, through the
// proxy the environment names) and JavaScript (a CONNECT to the proxy by hand) reach the
// profile's host, TLS verified against the session's CA bundle, with the credential set
// by the proxy; another host is refused (403); neither program can read the credential
// (environment, CA bundle, the proxy's replies).
func TestLiveEgressSessionLanguages(t *testing.T) {
	s, ts := injectSession(t)
	if s == nil {
		return
	}
	for _, tc := range []struct {
		lang, code  string
		allowed     string
		other, path string
	}{
		{"bash", egressBash, "allowed: ok api.example.org /bash\n", "other: curl: (56) CONNECT tunnel failed, response 403", "/bash"},
		{"javascript", egressJS, "allowed: HTTP/1.1 200 OK ok api.example.org /js\n", "other: refused HTTP/1.1 403", "/js"},
	} {
		res, err := s.Exec(t.Context(), launcher.Job{Code: tc.code, Language: tc.lang, Timeout: 90 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", tc.lang, err)
		}
		if res.ExitCode != 0 || res.SessionState != launcher.SessionKept {
			t.Fatalf("%s: exit %d, state %q\nstdout: %s\nstderr: %s", tc.lang, res.ExitCode, res.SessionState, res.Stdout, res.Stderr)
		}
		for _, w := range []string{tc.allowed, tc.other, "BEGIN CERTIFICATE"} {
			if !strings.Contains(res.Stdout, w) {
				t.Errorf("%s: stdout lacks %q:\n%s", tc.lang, w, res.Stdout)
			}
		}
		if strings.Contains(res.Stdout+res.Stderr, egresstest.InjectSecret) {
			t.Errorf("%s: the program read the profile's credential", tc.lang)
		}
		seen := ts.Seen()
		if len(seen) == 0 || seen[len(seen)-1].Get("Host") != "api.example.org" || seen[len(seen)-1].Get("Authorization") != "Bearer "+egresstest.InjectSecret {
			t.Errorf("%s: the server's last request was not the program's with the credential set (%d requests)", tc.lang, len(seen))
		}
	}
	if n := len(ts.Seen()); n != 2 {
		t.Errorf("the server got %d requests, want 2 (one a language)", n)
	}
}
