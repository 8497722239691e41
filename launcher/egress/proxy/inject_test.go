package proxy_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// injectSecret is the credential of the inject tests: no byte of it may reach the
// program, except through the echoing endpoint.
const injectSecret = "INJECTED-9c1d-credential"

const injectProfiles = `{"profiles": {"api": {
  "hosts": ["api.example.org", "plain.example.org"],
  "inject": {"api.example.org": {"headers": {"Authorization": "Bearer ${env:TOK}", "X-Api-Key": "${env:TOK}"}}}
}}}`

type envSecrets map[string]string

func (e envSecrets) Resolve(v string) (string, error) {
	for k, val := range e {
		v = strings.ReplaceAll(v, "${env:"+k+"}", val)
	}
	return v, nil
}

type injectRig struct {
	srv   *proxy.Server
	ts    *egresstest.TLSServer
	logs  *syncbuf.Buffer
	audit *syncbuf.Buffer
}

// newInjectRig is a proxy with injectProfiles whose hosts all lead to one TLSServer
// (names: names, by default both of the profile's).
func newInjectRig(t *testing.T, names ...string) *injectRig {
	t.Helper()
	if len(names) == 0 {
		names = []string{"api.example.org", "plain.example.org"}
	}
	ps, err := egress.ParseProfilesSecrets([]byte(injectProfiles), envSecrets{"TOK": injectSecret})
	if err != nil {
		t.Fatal(err)
	}
	rig := &injectRig{ts: egresstest.NewTLSServer(t, names...), logs: &syncbuf.Buffer{}, audit: &syncbuf.Buffer{}}
	rig.srv, err = proxy.New(ps, filepath.Join(t.TempDir(), "s"), "unit", owner.ID{}, zerolog.New(rig.logs))
	if err != nil {
		t.Fatal(err)
	}
	rig.srv.SetResolver(egresstest.Resolver{})
	rig.srv.SetDial(egresstest.Dial(rig.ts.Listener.Addr().String()))
	rig.srv.SetUpstreamRoots(rig.ts.Pool)
	a, err := proxy.OpenAudit("-", rig.audit)
	if err != nil {
		t.Fatal(err)
	}
	rig.srv.SetAudit(a)
	return rig
}

func (rig *injectRig) open(t *testing.T) *proxy.Channel {
	t.Helper()
	ch, err := rig.srv.OpenChannel("api")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// connect opens a CONNECT tunnel through ch and returns the connection after the
// proxy's answer, and that answer's status line.
func connect(t *testing.T, ch *proxy.Channel, target string) (net.Conn, string) {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(ch.Dir(), proxy.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		return nil, resp.Status + " " + string(body)
	}
	return c, resp.Status
}

// bundlePool is the CA bundle the channel gives its sandbox, as a pool.
func bundlePool(t *testing.T, ch *proxy.Channel) *x509.CertPool {
	t.Helper()
	if ch.CABundle() == "" {
		t.Fatal("the channel of a profile with inject rules has no CA bundle")
	}
	b, err := os.ReadFile(filepath.Join(ch.Dir(), ch.CABundle()))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("the CA bundle holds no certificate")
	}
	return pool
}

// tlsThrough opens a CONNECT tunnel through ch to host's port 443 and a TLS connection
// over it, verified against pool, offering protos (ALPN), its handshake done. wrap, when
// not nil, sees the tunnel's bytes under TLS. It returns the tunnel too.
func tlsThrough(t *testing.T, ch *proxy.Channel, host string, pool *x509.CertPool, wrap func(net.Conn) net.Conn, protos ...string) (net.Conn, *tls.Conn) {
	t.Helper()
	c, status := connect(t, ch, host+":443")
	if c == nil {
		t.Fatalf("CONNECT %s: %s", host, status)
	}
	under := c
	if wrap != nil {
		under = wrap(c)
	}
	tc := tls.Client(under, &tls.Config{ServerName: host, RootCAs: pool, NextProtos: protos})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS to %s through the proxy: %v", host, err)
	}
	return c, tc
}

// get sends one request over a TLS connection through ch to host, verified against
// pool, and returns the response with its body read and the peer's certificate chain.
func get(t *testing.T, ch *proxy.Channel, host string, pool *x509.CertPool, req *http.Request) (*http.Response, string, []*x509.Certificate) {
	t.Helper()
	_, tc := tlsThrough(t, ch, host, pool, nil, "h2", "http/1.1")
	if p := tc.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Fatalf("ALPN: the proxy agreed to h2")
	}
	if err := req.Write(tc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	tc.Close() // as urllib does after each request
	return resp, string(body), tc.ConnectionState().PeerCertificates
}

func newReq(t *testing.T, method, url string) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestInjectHeaders: a request to the injected host arrives with the rule's headers,
// the program's own Authorization replaced, over a certificate of the proxy's CA that
// only the channel's bundle makes trusted; the program reads no byte of the secret
// in any reply but an echoing endpoint's.
func TestInjectHeaders(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	pool := bundlePool(t, ch)
	req := newReq(t, "GET", "https://api.example.org/user?q=1")
	req.Header.Set("Authorization", "Bearer the-programs-own")
	req.Host = "evil.example.net" // another site on the same address must not get the credential
	resp, body, chain := get(t, ch, "api.example.org", pool, req)
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "ok api.example.org /user") {
		t.Errorf("got %s %q, want 200 ok api.example.org /user", resp.Status, body)
	}
	if strings.Contains(body+resp.Status+headerText(resp.Header), injectSecret) {
		t.Errorf("the reply shows the secret: %s %q %v", resp.Status, body, resp.Header)
	}
	seen := rig.ts.Seen()
	if len(seen) != 1 {
		t.Fatalf("the server got %d requests, want 1", len(seen))
	}
	if got := seen[0].Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+injectSecret {
		t.Errorf("Authorization at the server: got %q, want exactly the injected one", got)
	}
	if got := seen[0].Get("X-Api-Key"); got != injectSecret {
		t.Errorf("X-Api-Key at the server: got %q, want the injected one", got)
	}
	if got := seen[0].Get("Connection"); got != "" {
		t.Errorf("Connection at the server: got %q, want none (hop-by-hop)", got)
	}
	if got := seen[0].Get("Host"); got != "api.example.org" {
		t.Errorf("Host at the server: got %q, want api.example.org (the rule's host)", got)
	}
	// The certificate the program saw is the proxy's, for that name alone, under a
	// CA constrained to the injected hosts.
	leaf := chain[0]
	if strings.Contains(leaf.Issuer.CommonName, "egresstest") || len(leaf.DNSNames) != 1 || leaf.NotAfter.Sub(leaf.NotBefore) > 26*time.Hour {
		t.Errorf("leaf: issuer %q names %v valid %v, want the proxy's CA, one name, a day", leaf.Issuer.CommonName, leaf.DNSNames, leaf.NotAfter.Sub(leaf.NotBefore))
	}
	chains, err := leaf.Verify(x509.VerifyOptions{DNSName: "api.example.org", Roots: pool})
	if err != nil {
		t.Fatalf("verifying the leaf against the bundle: %v", err)
	}
	if ca := chains[0][len(chains[0])-1]; !ca.PermittedDNSDomainsCritical || strings.Join(ca.PermittedDNSDomains, ",") != "api.example.org" {
		t.Errorf("CA name constraints: %v critical %v, want [api.example.org] critical", ca.PermittedDNSDomains, ca.PermittedDNSDomainsCritical)
	}
	// A certificate for another name under that CA is refused by the constraints.
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "plain.example.org", Roots: pool}); err == nil {
		t.Error("the leaf verifies for another name")
	}
	// The echoing endpoint is the API reflecting what it got: the operator's to avoid.
	_, echoed, _ := get(t, ch, "api.example.org", pool, newReq(t, "GET", "https://api.example.org/headers"))
	if !strings.Contains(echoed, injectSecret) {
		t.Errorf("/headers: got %q, want the echo of the injected header (an echoing API leaks it)", echoed)
	}
	ch.Close()
	for _, l := range []string{rig.logs.String(), rig.audit.String()} {
		if strings.Contains(l, injectSecret) || strings.Contains(l, "the-programs-own") {
			t.Errorf("a log holds a header value:\n%s", l)
		}
	}
}

func headerText(h http.Header) string {
	var b strings.Builder
	h.Write(&b)
	return b.String()
}

// TestInjectOtherHostTunnelled: a host of the same profile without rules is an
// end-to-end tunnel: the program sees the real server's certificate and the server
// gets no injected header.
func TestInjectOtherHostTunnelled(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	resp, body, chain := get(t, ch, "plain.example.org", rig.ts.Pool, newReq(t, "GET", "https://plain.example.org/x"))
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "ok plain.example.org /x") {
		t.Errorf("got %s %q", resp.Status, body)
	}
	if got := chain[0].Issuer.CommonName; got != "egresstest CA" {
		t.Errorf("issuer of the certificate the program saw: got %q, want the real server's (egresstest CA)", got)
	}
	if h := rig.ts.Seen()[0]; h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Errorf("the server got injected headers on a host without rules: %v", h)
	}
}

// TestInjectRealHostMismatch: when the real host's certificate does not name it, the
// proxy refuses before it sets any header: the CONNECT fails with 502, and the server
// gets no request.
func TestInjectRealHostMismatch(t *testing.T) {
	rig := newInjectRig(t, "someone-else.example.org")
	ch := rig.open(t)
	c, status := connect(t, ch, "api.example.org:443")
	if c != nil || !strings.Contains(status, "502") || !strings.Contains(status, "certificate was refused") {
		t.Errorf("CONNECT to an injected host whose server shows another name: got %q, want 502 naming the certificate", status)
	}
	if strings.Contains(status, injectSecret) {
		t.Errorf("the refusal shows the secret: %q", status)
	}
	if n := len(rig.ts.Seen()); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

// TestInjectRedirectNotFollowed: a redirect reaches the program as it is; the proxy
// never follows it, so the headers go to no other host.
func TestInjectRedirectNotFollowed(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	resp, _, _ := get(t, ch, "api.example.org", bundlePool(t, ch), newReq(t, "GET", "https://api.example.org/redirect?to=https://plain.example.org/landed"))
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://plain.example.org/landed" {
		t.Errorf("got %s Location %q, want the 302 itself", resp.Status, resp.Header.Get("Location"))
	}
	if n := len(rig.ts.Seen()); n != 1 {
		t.Errorf("the server got %d requests, want 1 (the proxy followed the redirect)", n)
	}
}

// TestInjectUpgradeRefused: a websocket upgrade to an injected host is answered 501
// and never reaches the host.
func TestInjectUpgradeRefused(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	req := newReq(t, "GET", "https://api.example.org/ws")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, _, _ := get(t, ch, "api.example.org", bundlePool(t, ch), req)
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(resp.Status, "websockets") {
		t.Errorf("got %q, want 501 naming websockets", resp.Status)
	}
	if n := len(rig.ts.Seen()); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

// TestInjectAudit: the audit log has a line for the connection and one per request,
// with method, path (no query), status and the injected header's name, never a value.
func TestInjectAudit(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	get(t, ch, "api.example.org", bundlePool(t, ch), newReq(t, "POST", "https://api.example.org/repos/x?token=QUERYSECRET"))
	connect(t, ch, "nope.example.org:443")
	ch.Close()
	var lines []proxy.AuditLine
	for _, l := range strings.Split(strings.TrimSpace(rig.audit.String()), "\n") {
		var a proxy.AuditLine
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		lines = append(lines, a)
	}
	var req, conn, denied bool
	for _, a := range lines {
		switch {
		case a.Event == "request":
			req = a.Method == "POST" && a.Path == "/repos/x" && a.Status == 200 && a.Host == "api.example.org" &&
				strings.Join(a.Injected, ",") == "Authorization,X-Api-Key" && a.BytesUp > 0 && a.BytesDown > 0 && a.Channel != ""
		case a.Event == "connection" && a.Intercepted:
			conn = a.Host == "api.example.org" && a.Port == 443 && a.Decision == "allowed"
		case a.Event == "connection" && a.Decision == "denied":
			denied = a.Reason == "host_not_allowed" && a.Host == ""
		}
	}
	if !req || !conn || !denied {
		t.Errorf("audit: request line %v, intercepted connection line %v, denied line %v; want all:\n%s", req, conn, denied, rig.audit.String())
	}
	if s := rig.audit.String(); strings.Contains(s, injectSecret) || strings.Contains(s, "QUERYSECRET") || strings.Contains(s, "nope") {
		t.Errorf("the audit log holds a value, a query or a refused name:\n%s", s)
	}
}

// TestAuditLabel: every line of a channel, a request's, a connection's and a refusal's,
// carries the label it was opened with, under the server log's keys, and nothing else
// of another channel's.
func TestAuditLabel(t *testing.T) {
	rig := newInjectRig(t)
	labels := []backend.AuditLabel{{ExecID: "0123456789abcdef"}, {Session: "5e5510aa0b1c"}, {ExecID: "fedcba9876543210", Run: "a1b2c3d4e5f6"}}
	for _, label := range labels {
		c, err := rig.srv.Open(t.Context(), "api", label)
		if err != nil {
			t.Fatal(err)
		}
		ch := c.(*proxy.Channel)
		get(t, ch, "api.example.org", bundlePool(t, ch), newReq(t, "GET", "https://api.example.org/x"))
		connect(t, ch, "nope.example.org:443")
		ch.Close()
	}
	got := map[backend.AuditLabel][]string{}
	for _, l := range strings.Split(strings.TrimSpace(rig.audit.String()), "\n") {
		var a proxy.AuditLine
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		k := backend.AuditLabel{ExecID: a.ExecID, Session: a.Session, Run: a.Run}
		got[k] = append(got[k], a.Event+" "+a.Decision)
	}
	for _, label := range labels {
		slices.Sort(got[label]) // the connections end in any order
		if g := strings.Join(got[label], ", "); g != "connection allowed, connection denied, request allowed" {
			t.Errorf("lines labelled %+v: got %q, want a request, its connection and a refusal", label, g)
		}
	}
	if len(got) != len(labels) {
		t.Errorf("got lines under %d labels, want %d:\n%s", len(got), len(labels), rig.audit.String())
	}
	if s := rig.audit.String(); !strings.Contains(s, `"session":"5e5510aa0b1c"`) || !strings.Contains(s, `"exec_id":"fedcba9876543210","run":"a1b2c3d4e5f6"`) {
		t.Errorf("the audit log does not use the server log's keys:\n%s", s)
	}
}

// TestNoInjectNoBundle: a profile without rules gets no bundle and no interception,
// even when another profile of the server has rules.
func TestNoInjectNoBundle(t *testing.T) {
	ps, err := egress.ParseProfilesSecrets([]byte(`{"profiles": {
	  "api": {"hosts": ["api.example.org"], "inject": {"api.example.org": {"headers": {"A": "${env:TOK}"}}}},
	  "plain": {"hosts": ["api.example.org"]}}}`), envSecrets{"TOK": injectSecret})
	if err != nil {
		t.Fatal(err)
	}
	ts := egresstest.NewTLSServer(t, "api.example.org")
	srv, err := proxy.New(ps, filepath.Join(t.TempDir(), "s"), "unit", owner.ID{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv.SetResolver(egresstest.Resolver{})
	srv.SetDial(egresstest.Dial(ts.Listener.Addr().String()))
	ch, err := srv.OpenChannel("plain")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if ch.CABundle() != "" {
		t.Errorf("CABundle() = %q for a profile without rules, want none", ch.CABundle())
	}
	if _, err := os.Stat(filepath.Join(ch.Dir(), proxy.BundleName)); err == nil {
		t.Error("the channel's directory holds a CA bundle")
	}
	_, _, chain := get(t, ch, "api.example.org", ts.Pool, newReq(t, "GET", "https://api.example.org/"))
	if chain[0].Issuer.CommonName != "egresstest CA" {
		t.Errorf("issuer: got %q, want the real server's", chain[0].Issuer.CommonName)
	}
	if ts.Seen()[0].Get("A") != "" {
		t.Error("a profile without rules had a header injected")
	}
}

// TestInjectTraceRefused: TRACE, which echoes the request as the host got it, never
// reaches an injected host.
func TestInjectTraceRefused(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	resp, body, _ := get(t, ch, "api.example.org", bundlePool(t, ch), newReq(t, "TRACE", "https://api.example.org/"))
	if resp.StatusCode != http.StatusMethodNotAllowed || strings.Contains(body, injectSecret) {
		t.Errorf("got %q %q, want 405 without the secret", resp.Status, body)
	}
	if n := len(rig.ts.Seen()); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

// TestInjectReusesUpstream: the program's next connection to the injected host reuses
// the proxy's verified connection to the real host, within one Channel only, and not
// once the server has closed it.
func TestInjectReusesUpstream(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	pool := bundlePool(t, ch)
	for range 3 {
		req := newReq(t, "GET", "https://api.example.org/again")
		req.Close = true // "Connection: close", as urllib sends: the program's hop only
		resp, body, _ := get(t, ch, "api.example.org", pool, req)
		if resp.StatusCode != 200 || !resp.Close {
			t.Fatalf("got %s %q (close %v), want 200 closing the program's connection", resp.Status, body, resp.Close)
		}
		// The proxy keeps the connection once it has read the program's close.
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, func() bool { return rig.ts.Conns() == 1 }, "the server to have accepted 1 connection, got %d", rig.ts.Conns)
	// Another Channel (another sandbox) never gets this one's connection.
	other := rig.open(t)
	get(t, other, "api.example.org", bundlePool(t, other), newReq(t, "GET", "https://api.example.org/other"))
	time.Sleep(50 * time.Millisecond)
	if n := rig.ts.Conns(); n != 2 {
		t.Errorf("after another channel's request the server accepted %d connections, want 2", n)
	}
	// The server closes its idle connections: the next request gets a fresh one.
	rig.ts.Config.SetKeepAlivesEnabled(false)
	rig.ts.CloseClientConnections()
	time.Sleep(100 * time.Millisecond)
	rig.ts.Config.SetKeepAlivesEnabled(true)
	if resp, body, _ := get(t, ch, "api.example.org", pool, newReq(t, "GET", "https://api.example.org/after")); resp.StatusCode != 200 {
		t.Errorf("after the server closed the kept connection: got %s %q, want 200", resp.Status, body)
	}
}

func waitFor(t *testing.T, ok func() bool, format string, arg func() int) {
	t.Helper()
	for range 50 {
		if ok() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("waited for "+format, arg())
}

// TestInjectStreams: what the host has sent reaches the program while the host holds
// the rest (a stream, a long poll): the proxy buffers the head it writes to the program,
// and sends it, and each piece of the body, before it waits for the host's next bytes.
func TestInjectStreams(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	c, tc := tlsThrough(t, ch, "api.example.org", bundlePool(t, ch), nil)
	if err := newReq(t, "GET", "https://api.example.org/stream").Write(tc); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the head, while the host holds the rest: %v", err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "first\n" {
		t.Fatalf("the first line, while the host holds the rest: %q, %v", line, err)
	}
	rig.ts.Release()
	rest, err := io.ReadAll(resp.Body)
	if string(rest) != "last\n" || err != nil {
		t.Errorf("the rest: %q, %v", rest, err)
	}
}

// TestInjectResponseRecords: a small response reaches the program in few TLS records
// (its head in one, not one per piece that Response.Write writes: a record, a write
// and a read of the program's each, the larger part of what interception added to the
// time to first byte).
func TestInjectResponseRecords(t *testing.T) {
	rig := newInjectRig(t)
	ch := rig.open(t)
	var rc *recordCounter
	_, tc := tlsThrough(t, ch, "api.example.org", bundlePool(t, ch), func(c net.Conn) net.Conn {
		rc = &recordCounter{Conn: c}
		return rc
	})
	req := newReq(t, "GET", "https://api.example.org/small")
	if err := req.Write(tc); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.n = 0 // the handshake's and any session ticket's already read
	rc.mu.Unlock()
	resp, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	// The head and the body; a session ticket may come after the handshake.
	t.Logf("%d records", rc.n)
	if rc.n > 3 {
		t.Errorf("the response (%d header lines, body %q) came in %d TLS records, want at most 3", len(resp.Header), body, rc.n)
	}
}

// recordCounter counts the TLS application-data records read through it.
type recordCounter struct {
	net.Conn
	mu   sync.Mutex
	hdr  []byte // of the record being read, until it has its 5 bytes
	left int    // of the record being read, after its header
	n    int
}

func (r *recordCounter) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := b[:n]; len(p) > 0; {
		if r.left > 0 {
			k := min(r.left, len(p))
			r.left, p = r.left-k, p[k:]
			continue
		}
		k := min(5-len(r.hdr), len(p))
		r.hdr, p = append(r.hdr, p[:k]...), p[k:]
		if len(r.hdr) == 5 {
			if r.hdr[0] == 23 {
				r.n++
			}
			r.left, r.hdr = int(r.hdr[3])<<8|int(r.hdr[4]), r.hdr[:0]
		}
	}
	return n, err
}

// TestCABundleCarried: a Server without a socket directory (the Kubernetes backend
// carries its Channels) hands a Channel of a profile with rules the same bundle a
// directory would hold, certificates only, its last the CA that signs the leaves; a
// Channel of a profile without rules has none.
func TestCABundleCarried(t *testing.T) {
	ps, err := egress.ParseProfilesSecrets([]byte(`{"profiles": {
	  "api": {"hosts": ["api.example.org"], "inject": {"api.example.org": {"headers": {"A": "${env:TOK}"}}}},
	  "plain": {"hosts": ["api.example.org"]}}}`), envSecrets{"TOK": injectSecret})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(ps, "", "unit", owner.ID{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	api, err := srv.OpenChannel("api")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	plain, err := srv.OpenChannel("plain")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if api.CABundle() != proxy.BundleName || plain.CABundle() != "" || plain.CABundlePEM() != nil {
		t.Fatalf("CABundle: api %q, plain %q (%d bytes); want %q, none", api.CABundle(), plain.CABundle(), len(plain.CABundlePEM()), proxy.BundleName)
	}
	b := api.CABundlePEM()
	if strings.Contains(string(b), "PRIVATE KEY") || strings.Contains(string(b), injectSecret) {
		t.Fatal("the bundle holds a key or the secret")
	}
	var last *x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			t.Fatalf("a %s block in the bundle", blk.Type)
		}
		if last, err = x509.ParseCertificate(blk.Bytes); err != nil {
			t.Fatal(err)
		}
	}
	if last == nil || !strings.HasPrefix(last.Subject.CommonName, "mcp-exec egress injection CA") || !last.IsCA {
		t.Fatalf("the bundle's last certificate: %v, want the proxy's CA", last.Subject)
	}
}
