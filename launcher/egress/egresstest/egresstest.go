// Package egresstest holds what the live tests and benchmarks of egress profiles share
// across backends: the public host they reach, the adaptation to a machine whose DNS
// answers a gateway's address, the host's trust store for end-to-end TLS, the program
// that tries each way out of a sandbox, and the GET that the benchmarks time.
package egresstest

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
)

// Host is the public host of the live tests: one the CI machine reaches (Debian's
// mirrors, on 443 for TLS and on 80 for plain HTTP).
const Host = "deb.debian.org"

// StandIn is a public address that stands in for a gateway's (AdaptToGateway), or for
// any target a test's dialler takes elsewhere.
var StandIn = netip.MustParseAddr("146.75.122.132")

// AdaptToGateway adapts a test to a machine whose DNS answers every public name with
// the address of a transparent egress gateway in a range the proxy refuses (this
// project's CI machine answers 203.0.113.80, a documentation address): there the
// resolver answers the stand-in, a public address, for the gateway's, and the dialler
// takes the stand-in to the gateway. Every check of the proxy still runs, on the
// stand-in. With real DNS nothing is replaced.
func AdaptToGateway(t testing.TB, srv *proxy.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", Host+".")
	if err != nil || len(addrs) == 0 {
		t.Fatalf("looking up %s from the host: %v", Host, err)
	}
	gw := addrs[0].Unmap()
	if egress.Vet(gw, nil) == nil {
		return
	}
	t.Logf("%s resolves to %s here, which the proxy refuses: the test stands %s in for it", Host, gw, StandIn)
	srv.SetResolver(gatewayResolver{gw})
	srv.SetDial(func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
		if a.Addr() == StandIn {
			a = netip.AddrPortFrom(gw, a.Port())
		}
		d := net.Dialer{Timeout: 10 * time.Second}
		return d.DialContext(ctx, "tcp", a.String())
	})
}

type gatewayResolver struct{ gw netip.Addr }

func (g gatewayResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, network, host)
	for i, a := range addrs {
		if a.Unmap() == g.gw {
			addrs[i] = StandIn
		}
	}
	return addrs, err
}

// HostTrust is the host's own trust store, handed to the program as host-ca.pem: TLS
// is verified end to end against what the host itself trusts (on a machine whose egress
// gateway re-signs TLS, the gateway's CA is in it; on others, the public roots).
func HostTrust(t testing.TB) launcher.File {
	t.Helper()
	for _, p := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"} {
		if b, err := os.ReadFile(p); err == nil {
			return launcher.File{Name: "host-ca.pem", Data: b}
		}
	}
	t.Fatal("no system trust store on this host")
	return launcher.File{}
}

// Probes is a program that tries each way out of a sandbox with a profile naming Host
// on 443 and 80 and prints one JSON object: "ok ..." or "err <exception>: <text>" per
// attempt. Its stdin is a canary that it puts in request paths, headers and names, for
// the tests to look for in logs. It needs host-ca.pem (HostTrust).
const Probes = `
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
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    req = urllib.request.Request("https://deb.debian.org/debian/dists/stable/Release?" + CANARY,
                                 headers={"X-Canary": CANARY})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        body = r.read()
    return "%d %s" % (r.status, body.split(b"\n")[0].decode())

def wrong_name():
    # The real server's certificate, checked against another name: verification is
    # end to end, so this must fail (a proxy that intercepted TLS would not be trusted
    # at all; one that did not verify could not make this fail).
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"CONNECT deb.debian.org:443 HTTP/1.1\r\n\r\n")
    f = s.makefile("rb")
    status = f.readline()
    while f.readline() not in (b"\r\n", b""):
        pass
    ssl.create_default_context(cafile="host-ca.pem").wrap_socket(s, server_hostname="not-deb.example.org")
    return status

def plain_http():
    req = urllib.request.Request("http://deb.debian.org/debian/dists/stable/Release?" + CANARY,
                                 headers={"X-Canary": CANARY})
    with urllib.request.urlopen(req, timeout=30) as r:
        return "%d %s" % (r.status, r.read().split(b"\n")[0].decode())

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("1.1.1.1", 53))
    return "sent"

attempt("env", lambda: os.environ.get("HTTPS_PROXY"))
attempt("image_cas", lambda: ssl.create_default_context().cert_store_stats()["x509_ca"] > 0)
attempt("https", https)
attempt("https_again", https)
attempt("connect_allowed", lambda: raw_connect("deb.debian.org:443"))
attempt("wrong_name", wrong_name)
attempt("plain_http", plain_http)
attempt("other_host", lambda: urllib.request.urlopen("https://example.com/" + CANARY, timeout=20).status)
attempt("canary_host", lambda: raw_connect(CANARY.lower() + ".example.com:443"))
attempt("other_host_http", lambda: urllib.request.urlopen("http://example.com/" + CANARY, timeout=20).status)
attempt("ip_literal", lambda: raw_connect("151.101.2.132:443"))
attempt("ip_literal_dns", lambda: raw_connect("8.8.8.8:53"))
attempt("other_port", lambda: raw_connect("deb.debian.org:8443"))
attempt("localhost", lambda: raw_connect("localhost:443"))
attempt("direct_tcp", lambda: socket.create_connection(("151.101.2.132", 443), timeout=5))
attempt("udp", udp)
attempt("dns", lambda: socket.getaddrinfo("deb.debian.org", 443))
print(json.dumps(out))
`

// ProbesWant is what Probes must print in a sandbox with such a profile and no network
// of its own, on every backend: each key's value starts with its prefix.
var ProbesWant = map[string]string{
	"env":             "ok http://127.0.0.1:3128",
	"image_cas":       "ok True", // the image has CA certificates of its own
	"https":           "ok 200 Origin: Debian",
	"https_again":     "ok 200 Origin: Debian",
	"connect_allowed": "ok HTTP/1.1 200",
	"wrong_name":      "err SSLCertVerificationError",
	"plain_http":      "ok 200 Origin: Debian",
	"other_host":      "err URLError: <urlopen error Tunnel connection failed: 403 egress denied (host_not_allowed)",
	"other_host_http": "err HTTPError: HTTP Error 403: egress denied (host_not_allowed)",
	"canary_host":     "ok HTTP/1.1 403 egress denied (host_not_allowed)",
	"ip_literal":      "ok HTTP/1.1 403 egress denied (ip_literal)",
	"ip_literal_dns":  "ok HTTP/1.1 403 egress denied (ip_literal)",
	"other_port":      "ok HTTP/1.1 403 egress denied (port_not_allowed)",
	"localhost":       "ok HTTP/1.1 403 egress denied (special_name)",
	"direct_tcp":      "err OSError: [Errno 101] Network is unreachable",
	"udp":             "err OSError: [Errno 101] Network is unreachable",
	"dns":             "err gaierror:",
}

// CheckProbes reports each attempt of Probes' output that is not as ProbesWant says.
func CheckProbes(t testing.TB, out map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(ProbesWant)) {
		t.Logf("%s: %s", k, out[k])
		if !strings.HasPrefix(out[k], ProbesWant[k]) {
			t.Errorf("%s: got %q, want it to start with %q", k, out[k], ProbesWant[k])
		}
	}
}

// GetScript times, from wherever it runs, ten small HTTPS GETs from Host (time to first
// byte) and one download of a few MB (throughput), verifying TLS against host-ca.pem,
// and prints GetTimes as JSON. The same script runs on the host (direct) and in a
// sandbox with a profile (through the proxy), so the ratio is the proxy's cost.
const GetScript = `
import json, ssl, statistics, time, urllib.request
ctx = ssl.create_default_context(cafile="host-ca.pem")
def get(url, whole):
    t0 = time.monotonic()
    with urllib.request.urlopen(url, context=ctx, timeout=60) as r:
        r.read(1)
        first = time.monotonic() - t0
        n = 1 + len(r.read()) if whole else 0
    return first, n, time.monotonic() - t0
small = [get("https://deb.debian.org/debian/dists/stable/Release", False)[0] for _ in range(10)]
_, n, total = get("https://deb.debian.org/debian/dists/stable/main/binary-amd64/Packages.xz", True)
print(json.dumps({"ttfb_ms": statistics.median(small) * 1000, "mb_per_s": n / total / 1e6, "bytes": n}))
`

// GetTimes is what GetScript prints.
type GetTimes struct {
	TTFBms float64 `json:"ttfb_ms"`
	MBps   float64 `json:"mb_per_s"`
	Bytes  int64   `json:"bytes"`
}

// median is the median of f over ts.
func median(ts []GetTimes, f func(GetTimes) float64) float64 {
	v := make([]float64, len(ts))
	for i, t := range ts {
		v[i] = f(t)
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// getRounds is how many times each path runs in one iteration of CompareGets,
// alternating which goes first, so that a change in the network or the load hits both
// alike.
const getRounds = 5

// CompareGets runs GetScript on the host and, through sandboxGet, in a sandbox with a
// profile, getRounds of each interleaved per iteration, and reports the medians and the
// ratios (sandbox/host) of the medians of the time to first byte and of the time per
// byte.
func CompareGets(b *testing.B, sandboxGet func() GetTimes) {
	ca := HostTrust(b)
	dir := b.TempDir()
	if err := os.WriteFile(dir+"/host-ca.pem", ca.Data, 0o600); err != nil {
		b.Fatal(err)
	}
	hostGet := func() GetTimes {
		cmd := exec.Command("python3", "-c", GetScript)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("host: %v", err)
		}
		return decodeTimes(b, out)
	}
	for b.Loop() {
		var host, sb []GetTimes
		for i := range getRounds {
			if i%2 == 0 {
				host = append(host, hostGet())
				sb = append(sb, sandboxGet())
			} else {
				sb = append(sb, sandboxGet())
				host = append(host, hostGet())
			}
			b.Logf("round %d: host %.1f ms %.1f MB/s, proxy %.1f ms %.1f MB/s (%d bytes)", i,
				host[i].TTFBms, host[i].MBps, sb[i].TTFBms, sb[i].MBps, sb[i].Bytes)
		}
		ttfb := func(t GetTimes) float64 { return t.TTFBms }
		mbps := func(t GetTimes) float64 { return t.MBps }
		ht, pt := median(host, ttfb), median(sb, ttfb)
		hm, pm := median(host, mbps), median(sb, mbps)
		b.ReportMetric(ht, "host-ttfb-ms")
		b.ReportMetric(pt, "proxy-ttfb-ms")
		b.ReportMetric(pt/ht, "ttfb-ratio")
		b.ReportMetric(hm, "host-MB/s")
		b.ReportMetric(pm, "proxy-MB/s")
		b.ReportMetric(hm/pm, "time-ratio")
	}
}

// SandboxGet is a sandboxGet for CompareGets: GetScript run by l under profile.
func SandboxGet(b *testing.B, l *launcher.Launcher, profile string) func() GetTimes {
	ca := HostTrust(b)
	return func() GetTimes {
		res, err := l.Run(context.Background(), launcher.Job{Code: GetScript, Egress: profile, Files: []launcher.File{ca}, Timeout: 120 * time.Second})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("sandbox: %v %s %s", err, res.Stdout, res.Stderr)
		}
		return decodeTimes(b, []byte(res.Stdout))
	}
}

// decodeTimes is GetScript's output as GetTimes.
func decodeTimes(b *testing.B, out []byte) GetTimes {
	b.Helper()
	var t GetTimes
	if err := json.Unmarshal(out, &t); err != nil {
		b.Fatalf("GetScript's output %q: %v", out, err)
	}
	return t
}
