package launcher

import (
	"net"
	"slices"
	"testing"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

type fakeChannel struct{ dir, bundle string }

func (f fakeChannel) Dir() string            { return f.dir }
func (f fakeChannel) ServeEgress(c net.Conn) { c.Close() }
func (f fakeChannel) ResetCaps()             {}
func (f fakeChannel) Close() error           { return nil }
func (f fakeChannel) CABundle() string       { return f.bundle }

// TestWithEgressBundle: only a channel with a CA bundle (a profile with inject rules)
// points the sandbox's TLS stacks at it, and only where the bundle is mounted.
func TestWithEgressBundle(t *testing.T) {
	want := []string{"SSL_CERT_FILE=/egress/ca-bundle.pem", "REQUESTS_CA_BUNDLE=/egress/ca-bundle.pem", "CURL_CA_BUNDLE=/egress/ca-bundle.pem", "PIP_CERT=/egress/ca-bundle.pem"}
	for _, tc := range []struct {
		name string
		ch   backend.EgressChannel
		has  bool
	}{
		{"inject", fakeChannel{dir: "/run/x", bundle: "ca-bundle.pem"}, true},
		{"no rules", fakeChannel{dir: "/run/x"}, false},
		{"no directory", fakeChannel{bundle: "ca-bundle.pem"}, false},
	} {
		env := withEgress(backend.Spec{}, tc.ch).Env
		for _, w := range want {
			if slices.Contains(env, w) != tc.has {
				t.Errorf("%s: %s in the environment: got %v, want %v (%q)", tc.name, w, !tc.has, tc.has, env)
			}
		}
	}
}
