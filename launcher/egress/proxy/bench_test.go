package proxy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
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

// BenchmarkEgressGet: an HTTPS GET through the egress proxy against the same GET from
// the host, in the same run; reported as ratios (proxy/host) of the median time to first
// byte and of the throughput. Run: go test -run '^$' -bench EgressGet -benchtime 1x.
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
	for b.Loop() {
		cmd := exec.Command("python3", "-c", getScript)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("host: %v", err)
		}
		var host, prox getTimes
		if err := json.Unmarshal(out, &host); err != nil {
			b.Fatal(err)
		}
		res, err := l.Run(context.Background(), launcher.Job{Code: getScript, Egress: "deb", Files: []launcher.File{ca}, Timeout: 120 * time.Second})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("sandbox: %v %s %s", err, res.Stdout, res.Stderr)
		}
		if err := json.Unmarshal([]byte(res.Stdout), &prox); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(host.TTFBms, "host-ttfb-ms")
		b.ReportMetric(prox.TTFBms, "proxy-ttfb-ms")
		b.ReportMetric(prox.TTFBms/host.TTFBms, "ttfb-ratio")
		b.ReportMetric(host.MBps, "host-MB/s")
		b.ReportMetric(prox.MBps, "proxy-MB/s")
		b.ReportMetric(host.MBps/prox.MBps, "time-ratio")
		b.Logf("download %d bytes", prox.Bytes)
	}
}
