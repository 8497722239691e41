package proxy_test

import (
	"testing"

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
