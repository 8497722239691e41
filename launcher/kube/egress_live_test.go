package kube

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

const (
	egressHost   = "deb.debian.org"
	egressCanary = "CANARY-5b1d0c-caller-data"
)

// egressProbes tries each way out of a pod with a profile and prints one JSON object:
// "ok ..." or "err <exception>: <text>" per attempt.
const egressProbes = `
import json, os, socket, ssl, sys, urllib.request
out = {}
def attempt(name, f):
    try:
        out[name] = "ok " + str(f())
    except Exception as e:
        out[name] = "err %s: %s" % (type(e).__name__, e)
CANARY = sys.stdin.read().strip()
def raw_connect(target):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    line = s.makefile("rb").readline().decode().strip()
    s.close()
    return line
def https():
    ctx = ssl.create_default_context(cafile="host-ca.pem")
    req = urllib.request.Request("https://deb.debian.org/debian/dists/stable/Release?" + CANARY, headers={"X-Canary": CANARY})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        return "%d %s" % (r.status, r.read().split(b"\n")[0].decode())
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("1.1.1.1", 53))
    return "sent"
attempt("https", https)
attempt("https_again", https)
attempt("other_host", lambda: urllib.request.urlopen("https://example.com/" + CANARY, timeout=20).status)
attempt("ip_literal", lambda: raw_connect("151.101.2.132:443"))
attempt("other_port", lambda: raw_connect("deb.debian.org:8443"))
attempt("direct_tcp", lambda: socket.create_connection(("151.101.2.132", 443), timeout=5))
attempt("udp", udp)
attempt("dns", lambda: socket.getaddrinfo("deb.debian.org", 443))
attempt("connect_allowed", lambda: raw_connect("deb.debian.org:443"))
print(json.dumps(out))
`

// TestLiveEgressProfile: a pod with a profile reaches the profile's host through the
// server's proxy over port-forward streams (the start-up check passes over them first),
// TLS verified end to end against the host's trust store; another host, an IP literal
// and another port get 403, and the pod itself has no way out (TCP, UDP, DNS). Nothing
// of the requests (the canary in the path and a header) reaches the proxy's log.
func TestLiveEgressProfile(t *testing.T) {
	ps, err := egress.ParseProfiles([]byte(`{"profiles": {"deb": {"hosts": ["` + egressHost + `"], "ports": [443, 80]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	logs := &launchertest.Buffer{}
	srv, err := proxy.New(ps, "", "kube-live", zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	gatewayStandIn(t, srv)
	l, _, _ := testLauncher(t, launcher.Options{Egress: srv})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := l.CheckEgress(ctx); err != nil {
		t.Fatalf("start-up check over port-forward: %v", err)
	}
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Run(ctx, launcher.Job{Code: egressProbes, Stdin: egressCanary, Egress: "deb", Timeout: 60 * time.Second,
		Files: []launcher.File{{Name: "host-ca.pem", Data: ca}}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d, stderr %s", err, res.ExitCode, res.Stderr)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("output %q: %v", res.Stdout, err)
	}
	for k, v := range out {
		t.Logf("%s: %s", k, v)
	}
	for key, prefix := range map[string]string{
		"https":           "ok 200 Origin: Debian",
		"https_again":     "ok 200 Origin: Debian",
		"other_host":      "err URLError: <urlopen error Tunnel connection failed: 403",
		"ip_literal":      "ok HTTP/1.1 403",
		"other_port":      "ok HTTP/1.1 403",
		"direct_tcp":      "err OSError",
		"udp":             "err OSError",
		"dns":             "err gaierror",
		"connect_allowed": "ok HTTP/1.1 200",
	} {
		if !strings.HasPrefix(out[key], prefix) {
			t.Errorf("%s: got %q, want it to start with %q", key, out[key], prefix)
		}
	}
	if s := logs.String(); strings.Contains(s, egressCanary) || strings.Contains(strings.ToLower(s), strings.ToLower(egressCanary)) {
		t.Errorf("the caller's data reached the proxy's log:\n%s", s)
	} else if !strings.Contains(s, `"decision":"allowed"`) {
		t.Errorf("no allowed connection logged:\n%s", s)
	}
}

// gatewayStandIn adapts the test to a machine whose DNS answers every public name with a
// gateway's address in a range the proxy refuses (as launcher/egress/proxy's live tests
// do): the resolver answers a public stand-in for it and the dialler takes the stand-in
// to the gateway. With real DNS nothing is replaced.
func gatewayStandIn(t *testing.T, srv *proxy.Server) {
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", egressHost+".")
	if err != nil || len(addrs) == 0 {
		t.Fatalf("looking up %s: %v", egressHost, err)
	}
	gw := addrs[0].Unmap()
	if egress.Vet(gw, nil) == nil {
		return
	}
	standIn := netip.MustParseAddr("146.75.122.132")
	srv.SetResolver(standInResolver{gw, standIn})
	srv.SetDial(func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
		if a.Addr() == standIn {
			a = netip.AddrPortFrom(gw, a.Port())
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a.String())
	})
}

type standInResolver struct{ gw, standIn netip.Addr }

func (r standInResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, network, host)
	for i, a := range addrs {
		if a.Unmap() == r.gw {
			addrs[i] = r.standIn
		}
	}
	return addrs, err
}

// TestLiveEgressSharedSessionRefused: a shared session cannot have a profile (its
// channel would live in one replica), and says so before any pod is made.
func TestLiveEgressSharedSessionRefused(t *testing.T) {
	ps, err := egress.ParseProfiles([]byte(`{"profiles": {"deb": {"hosts": ["` + egressHost + `"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(ps, "", "kube-live", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l, _, _ := testLauncher(t, launcher.Options{Egress: srv})
	_, err = l.OpenSession(context.Background(), launcher.SessionOptions{Shared: true, Egress: "deb",
		Labels: map[string]string{"dev.mcp-exec.session-key": "k"}})
	if !errors.Is(err, launcher.ErrSharedEgress) {
		t.Fatalf("shared session with a profile: got %v, want %v", err, launcher.ErrSharedEgress)
	}
}
