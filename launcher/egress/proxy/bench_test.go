package proxy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// getScript times, from wherever it runs, ten small HTTPS GETs (time to first byte)
// and one download of a few MB (throughput), verifying TLS against host-ca.pem. The
// same script runs on the host (direct) and in a sandbox with a profile (through the
// proxy), so the ratio is the proxy's cost.
const getScript = `
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

type getTimes struct {
	TTFBms  float64 `json:"ttfb_ms"`
	MBps    float64 `json:"mb_per_s"`
	Bytes   int64   `json:"bytes"`
	Elapsed time.Duration
}

// egressRounds is how many times each path runs in one iteration, alternating which
// goes first, so that a change in the network or the load hits both alike.
const egressRounds = 5

// BenchmarkEgressGet: an HTTPS GET through the egress proxy against the same GET from
// the host, in the same run, egressRounds of each interleaved; reported as the medians
// and the ratios (proxy/host) of the medians of the time to first byte and of the
// throughput. Run: go test -run '^$' -bench EgressGet -benchtime 1x.
func BenchmarkEgressGet(b *testing.B) {
	ca := hostTrust(b)
	dir := b.TempDir()
	if err := os.WriteFile(dir+"/host-ca.pem", ca.Data, 0o600); err != nil {
		b.Fatal(err)
	}
	l, _, _, served := liveLauncher(b)
	if !served {
		b.Fatalf("runtime %q does not let the channel through: the benchmark needs one that does", l.Options().Runtime)
	}
	hostGet := func() getTimes {
		cmd := exec.Command("python3", "-c", getScript)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("host: %v", err)
		}
		var t getTimes
		if err := json.Unmarshal(out, &t); err != nil {
			b.Fatal(err)
		}
		return t
	}
	proxyGet := func() getTimes {
		res, err := l.Run(context.Background(), launcher.Job{Code: getScript, Egress: "deb", Files: []launcher.File{ca}, Timeout: 120 * time.Second})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("sandbox: %v %s %s", err, res.Stdout, res.Stderr)
		}
		var t getTimes
		if err := json.Unmarshal([]byte(res.Stdout), &t); err != nil {
			b.Fatal(err)
		}
		return t
	}
	for b.Loop() {
		var host, prox []getTimes
		for i := range egressRounds {
			if i%2 == 0 {
				host = append(host, hostGet())
				prox = append(prox, proxyGet())
			} else {
				prox = append(prox, proxyGet())
				host = append(host, hostGet())
			}
			b.Logf("round %d: host %.1f ms %.1f MB/s, proxy %.1f ms %.1f MB/s (%d bytes)", i,
				host[i].TTFBms, host[i].MBps, prox[i].TTFBms, prox[i].MBps, prox[i].Bytes)
		}
		ht, pt := median(host, func(t getTimes) float64 { return t.TTFBms }), median(prox, func(t getTimes) float64 { return t.TTFBms })
		hm, pm := median(host, func(t getTimes) float64 { return t.MBps }), median(prox, func(t getTimes) float64 { return t.MBps })
		b.ReportMetric(ht, "host-ttfb-ms")
		b.ReportMetric(pt, "proxy-ttfb-ms")
		b.ReportMetric(pt/ht, "ttfb-ratio")
		b.ReportMetric(hm, "host-MB/s")
		b.ReportMetric(pm, "proxy-MB/s")
		b.ReportMetric(hm/pm, "time-ratio")
	}
}

func median(ts []getTimes, f func(getTimes) float64) float64 {
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
