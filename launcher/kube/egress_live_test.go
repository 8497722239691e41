package kube

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

const egressCanary = "CANARY-5b1d0c-caller-data"

// egressProfiles: "deb" names the live tests' public host, "other" a host they never
// contact.
const egressProfiles = `{"profiles": {
  "deb": {"hosts": ["` + egresstest.Host + `"], "ports": [443, 80]},
  "other": {"hosts": ["example.org"]}
}}`

// egressProxy is the server's proxy with egressProfiles, logging to logs, adapted to
// this machine's DNS (egresstest.AdaptToGateway).
func egressProxy(t testing.TB, logs io.Writer) *proxy.Server {
	t.Helper()
	ps, err := egress.ParseProfiles([]byte(egressProfiles))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(ps, "", "kube-live", owner.ID{}, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	egresstest.AdaptToGateway(t, srv)
	return srv
}

// TestLiveEgressProfile: a pod with a profile reaches the profile's host through the
// server's proxy over port-forward streams (the start-up check passes over them first),
// TLS verified end to end against the host's trust store; another host, an IP literal
// and another port get 403, and the pod itself has no way out (TCP, UDP, DNS). Nothing
// of the requests (the canary in the path and a header) reaches the proxy's log. A pod
// with another profile, running at the same time, gets only its own profile's hosts:
// its channel is its own pod's, and the proxy knows it by that channel.
func TestLiveEgressProfile(t *testing.T) {
	logs := &launchertest.Buffer{}
	srv := egressProxy(t, logs)
	l, _, _ := testLauncher(t, launcher.Options{Egress: srv, MaxConcurrent: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := l.CheckEgress(ctx); err != nil {
		t.Fatalf("start-up check over port-forward: %v", err)
	}
	// The other pod asks for the first one's host, over its own relay, while the
	// first one runs its probes.
	other := make(chan launcher.Result, 1)
	go func() {
		res, err := l.Run(ctx, launcher.Job{Egress: "other", Timeout: 60 * time.Second, Code: `
import socket, time
time.sleep(2)
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(b"CONNECT deb.debian.org:443 HTTP/1.1\r\n\r\n")
print(s.recv(4096).decode().replace("\r\n", " | "))`})
		if err != nil {
			t.Errorf("pod with profile other: %v", err)
		}
		other <- res
	}()
	res, err := l.Run(ctx, launcher.Job{Code: egresstest.Probes, Stdin: egressCanary, Egress: "deb", Timeout: 60 * time.Second,
		Files: []launcher.File{egresstest.HostTrust(t)}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d, stderr %s", err, res.ExitCode, res.Stderr)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("output %q: %v", res.Stdout, err)
	}
	egresstest.CheckProbes(t, out)
	o := <-other
	t.Logf("pod with profile other: %s", o.Stdout)
	if !strings.HasPrefix(o.Stdout, "HTTP/1.1 403 egress denied (host_not_allowed)") || !strings.Contains(o.Stdout, `profile "other"`) {
		t.Errorf("pod with profile other asking for %s: got %q (stderr %q), want 403 host_not_allowed naming profile \"other\"", egresstest.Host, o.Stdout, o.Stderr)
	}
	if s := logs.String(); strings.Contains(strings.ToLower(s), strings.ToLower(egressCanary)) || strings.Contains(s, "Release") {
		t.Errorf("the caller's data reached the proxy's log:\n%s", s)
	} else if !strings.Contains(s, `"profile":"deb"`) || !strings.Contains(s, `"decision":"allowed"`) || !strings.Contains(s, `"profile":"other"`) {
		t.Errorf("the log lacks an allowed connection under deb or the denial under other:\n%s", s)
	}
}

// TestLiveEgressInject: inject rules on a pod, its channel over port-forward streams
// and its CA bundle written by its start gate: the program's request reaches the
// test's TLS server with the injected header in place of its own, and the program
// reads no byte of the secret anywhere (environment, every process's, /egress with the
// bundle, /tmp, the proxy's replies and errors); a host of the same profile without
// rules shows its real certificate, a real host whose certificate does not match is
// refused, and the audit lines carry the job's exec_id and no secret
// (egresstest.CheckInject, as on Docker). Then code mode: a tool over the bridge and
// the injected host in one program.
func TestLiveEgressInject(t *testing.T) {
	logs, audit := &launchertest.Buffer{}, &launchertest.Buffer{}
	srv, ts := egresstest.InjectServer(t, "", logs, audit)
	l, _, _ := testLauncher(t, launcher.Options{Egress: srv})
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	if err := l.CheckEgress(ctx); err != nil {
		t.Fatalf("start-up check over port-forward: %v", err)
	}
	job := egresstest.InjectJob(ts)
	job.Timeout, job.Audit = 90*time.Second, backend.AuditLabel{ExecID: "0kube1inject"}
	start := time.Now()
	res, err := l.Run(ctx, job)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d, stdout %.500s, stderr %s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("the inject program's pod in %v", time.Since(start).Round(time.Millisecond))
	var out map[string]string
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("output %q: %v", res.Stdout, err)
	}
	egresstest.CheckInject(t, out, ts, logs.String(), audit.String())
	lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
	for _, line := range lines {
		if !strings.Contains(line, `"exec_id":"0kube1inject"`) {
			t.Errorf("an audit line without the job's exec_id: %s", line)
		}
	}

	seen := len(ts.Seen())
	tools := &launcher.Tools{
		Catalog: []byte(`{"servers":[{"name":"echo","module":"echo","tools":[
 {"name":"echo","function":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}]}`),
		Serve: func(context.Context, []byte, int) []byte {
			return []byte(`{"result":{"content":[],"structuredContent":{"text":"hi"}}}`)
		},
	}
	res, err = l.Run(ctx, launcher.Job{Egress: "api", Tools: tools, Timeout: 90 * time.Second, Code: `
import os, sys, urllib.request
from mcptools import echo
print(echo.echo(text="hi"))
with urllib.request.urlopen("https://api.example.org/tools", timeout=30) as r:
    print(r.status, r.read().decode().strip())
print("/egress writable by the program:", os.access("/egress", os.W_OK), file=sys.stderr)
`})
	if want := "{'text': 'hi'}\n200 ok api.example.org /tools\n"; err != nil || res.Stdout != want {
		t.Errorf("code mode with the profile: got %q (%v, stderr %s), want %q", res.Stdout, err, res.Stderr, want)
	}
	t.Logf("%s", res.Stderr) // docs/kubernetes.md says it is, and why that does not matter
	if all := ts.Seen(); len(all) != seen+1 || all[seen].Get("Authorization") != "Bearer "+egresstest.InjectSecret {
		t.Errorf("code mode: the server got %d requests; want 1 with the injected header", len(all)-seen)
	}
}

// TestLiveEgressSharedSessionRefused: a shared session cannot have a profile (its
// channel would live in one replica), and says so before any pod is made.
func TestLiveEgressSharedSessionRefused(t *testing.T) {
	l, _, _ := testLauncher(t, launcher.Options{Egress: egressProxy(t, io.Discard)})
	_, err := l.OpenAttached(context.Background(), launcher.SessionOptions{Egress: "deb",
		Labels: map[string]string{"dev.mcp-exec.session-key": "k"}})
	if !errors.Is(err, launcher.ErrSharedEgress) {
		t.Fatalf("shared session with a profile: got %v, want %v", err, launcher.ErrSharedEgress)
	}
}

// TestLiveGVisorEgressRefused: under the RuntimeClass gvisor a port-forward reaches the pod's
// network namespace on the node, not gVisor's own network stack where the relay listens, so
// the start-up check cannot reach the pod's relay and refuses the profiles, naming gVisor.
func TestLiveGVisorEgressRefused(t *testing.T) {
	l := gvisorLauncher(t, gvisorRuntimeClass, launcher.Options{Pids: gvisorPids, Memory: 256 << 20, CPUs: 1, Egress: egressProxy(t, io.Discard)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	err := l.CheckEgress(ctx)
	t.Logf("CheckEgress under gVisor in %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, launcher.ErrEgressChannel) || !strings.Contains(err.Error(), "under gVisor") {
		t.Fatalf("CheckEgress: got %v, want %v naming gVisor", err, launcher.ErrEgressChannel)
	}
}

// BenchmarkLiveEgressGet: an HTTPS GET from a pod through the server's proxy, over
// port-forward streams, against the same GET from the host, interleaved
// (egresstest.CompareGets): the medians and the ratios (pod/host) of the time to first
// byte and of the time per byte. Run: go test -run '^$' -bench LiveEgressGet -benchtime 1x
// ./launcher/kube with MCP_EXEC_TEST_KUBECONFIG.
func BenchmarkLiveEgressGet(b *testing.B) {
	l, _, _ := testLauncher(b, launcher.Options{Egress: egressProxy(b, io.Discard)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := l.CheckEgress(ctx); err != nil {
		b.Fatalf("start-up check over port-forward: %v", err)
	}
	egresstest.CompareGets(b, egresstest.SandboxGet(b, l, "deb"))
}

// TestLiveEgressEarlyClose: a program that closes its connection with a reply still
// coming (it read what it wanted; the kernel answers the rest with a reset) leaves the
// next connections whole. The relay used to pass that reset on to the tunnel, and about
// one connection in ten after it was reset in turn or stalled; it now ends the tunnel
// with a FIN and drains it. The target is a local server behind a name the proxy
// resolves to a public stand-in it never dials, so no DNS or gateway is in the loop.
func TestLiveEgressEarlyClose(t *testing.T) {
	body := strings.Repeat("x", 1<<20)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = io.WriteString(w, body)
	}))
	defer target.Close()
	ps, err := egress.ParseProfiles([]byte(`{"profiles": {"local": {"hosts": ["early-close.mcp-exec.dev"], "ports": [80]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(ps, "", "kube-live", owner.ID{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv.SetResolver(fixedResolver{egresstest.StandIn}) // public, never dialled
	srv.SetDial(func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target.Listener.Addr().String())
	})
	l, _, _ := testLauncher(t, launcher.Options{Egress: srv})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := l.CheckEgress(ctx); err != nil {
		t.Fatalf("start-up check over port-forward: %v", err)
	}
	res, err := l.Run(ctx, launcher.Job{Egress: "local", Timeout: 90 * time.Second, Code: `
import json, socket
req = b"GET http://early-close.mcp-exec.dev/ HTTP/1.1\r\nHost: early-close.mcp-exec.dev\r\nConnection: close\r\n\r\n"
heads = []
for i in range(40):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
        s.sendall(req)
        got = b""
        while b"\r\n" not in got:
            d = s.recv(4096)
            if not d:
                break
            got += d
        s.close()  # the rest of the megabyte unread: a reset
        heads.append(got.split(b"\r\n")[0].decode())
    except OSError as e:
        heads.append(repr(e))
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(req)
whole = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    whole += d
print(json.dumps({"heads": heads, "last": len(whole.split(b"\r\n\r\n", 1)[-1])}))`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d, stderr %s", err, res.ExitCode, res.Stderr)
	}
	var out struct {
		Heads []string
		Last  int
	}
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("output %q: %v", res.Stdout, err)
	}
	bad := 0
	for i, h := range out.Heads {
		if h != "HTTP/1.1 200 OK" {
			bad++
			t.Errorf("connection %d after early closes: %q, want HTTP/1.1 200 OK", i, h)
		}
	}
	if len(out.Heads) != 40 || out.Last != len(body) {
		t.Errorf("%d connections, the last read whole got %d bytes; want 40 and %d", len(out.Heads), out.Last, len(body))
	}
	t.Logf("40 connections closed early, %d failed; then a whole reply of %d bytes", bad, out.Last)
}

// fixedResolver answers every name with one address.
type fixedResolver struct{ a netip.Addr }

func (f fixedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{f.a}, nil
}
