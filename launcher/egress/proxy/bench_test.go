package proxy_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"

	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
)

// BenchmarkEgressGet: an HTTPS GET through the egress proxy against the same GET from
// the host, in the same run, interleaved (egresstest.CompareGets); reported as the
// medians and the ratios (proxy/host) of the medians of the time to first byte and of
// the throughput. Run: go test -run '^$' -bench EgressGet -benchtime 1x.
func BenchmarkEgressGet(b *testing.B) {
	l, _, _, served := liveLauncher(b)
	if !served {
		b.Fatalf("runtime %q does not let the channel through: the benchmark needs one that does", l.Options().Runtime)
	}
	egresstest.CompareGets(b, egresstest.SandboxGet(b, l, "deb"))
}

// injectGetScript times, in a sandbox with the "api" profile of liveInjectProfiles,
// the same GETs from the test's TLS server through an injected host (TLS terminated
// by the proxy, the request rewritten, a second TLS to the server) and through a
// tunnelled one (end to end): per round, the median time to first byte of ten small
// GETs and one 16 MB download each, the order alternating per round.
const injectGetScript = `
import json, ssl, statistics, time, urllib.request
ctx = ssl.create_default_context()
ctx.load_verify_locations("test-ca.pem")
def get(url, whole):
    t0 = time.monotonic()
    with urllib.request.urlopen(url, context=ctx, timeout=60) as r:
        r.read(1)
        first = time.monotonic() - t0
        n = 1 + len(r.read()) if whole else 0
    return first, n, time.monotonic() - t0
def measure(host):
    small = [get("https://%s/x" % host, False)[0] for _ in range(10)]
    _, n, total = get("https://%s/bytes?n=16777216" % host, True)
    return {"ttfb_ms": statistics.median(small) * 1000, "mb_per_s": n / total / 1e6}
rounds = []
for i in range(5):
    order = ["api.example.org", "plain.example.org"][:: 1 if i % 2 == 0 else -1]
    r = {h: measure(h) for h in order}
    rounds.append({"inject": r["api.example.org"], "tunnel": r["plain.example.org"]})
print(json.dumps(rounds))
`

// BenchmarkEgressInjectGet: HTTPS GETs through an injected host against a tunnelled
// host of the same profile and the same local server, in the same sandbox, five
// interleaved rounds; reported as the medians and the ratios (inject/tunnel) of the
// time to first byte and of the throughput (tunnel MB/s over inject MB/s: above 1 the
// injected path is slower). Run: go test -run '^$' -bench EgressInjectGet -benchtime 1x.
func BenchmarkEgressInjectGet(b *testing.B) {
	l, ts, _, _, served := injectLauncher(b)
	if !served {
		b.Fatalf("runtime %q does not let the channel through: the benchmark needs one that does", l.Options().Runtime)
	}
	type times struct {
		TTFB float64 `json:"ttfb_ms"`
		MBps float64 `json:"mb_per_s"`
	}
	for b.Loop() {
		res, err := l.Run(context.Background(), launcher.Job{Code: injectGetScript, Egress: "api", Timeout: 300 * time.Second,
			Files: []launcher.File{{Name: "test-ca.pem", Data: ts.CAPEM}}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("sandbox: %v %s %s", err, res.Stdout, res.Stderr)
		}
		var rounds []map[string]times
		if err := json.Unmarshal([]byte(res.Stdout), &rounds); err != nil {
			b.Fatalf("output %q: %v", res.Stdout, err)
		}
		var it, tt, im, tm []float64
		for i, r := range rounds {
			b.Logf("round %d: inject %.1f ms %.1f MB/s, tunnel %.1f ms %.1f MB/s", i, r["inject"].TTFB, r["inject"].MBps, r["tunnel"].TTFB, r["tunnel"].MBps)
			it, tt = append(it, r["inject"].TTFB), append(tt, r["tunnel"].TTFB)
			im, tm = append(im, r["inject"].MBps), append(tm, r["tunnel"].MBps)
		}
		// 55 requests per host: the tunnel opens a server connection for each; the
		// injected host's are fewer where the Channel reused its own.
		b.ReportMetric(float64(ts.Conns()-55), "inject-server-conns")
		b.ReportMetric(med(tt), "tunnel-ttfb-ms")
		b.ReportMetric(med(it), "inject-ttfb-ms")
		b.ReportMetric(med(it)/med(tt), "ttfb-ratio")
		b.ReportMetric(med(tm), "tunnel-MB/s")
		b.ReportMetric(med(im), "inject-MB/s")
		b.ReportMetric(med(tm)/med(im), "time-ratio")
	}
}

func med(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}
