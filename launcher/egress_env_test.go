package launcher

import (
	"bytes"
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
func (f fakeChannel) CABundlePEM() []byte {
	if f.bundle == "" {
		return nil
	}
	return []byte("PEM")
}

// TestWithEgressBundle: only a channel with a CA bundle (a profile with inject rules)
// points the sandbox's TLS stacks at it: mounted with the channel's directory, or
// handed to the backend that carries the channel (Spec.EgressCABundle) to write there.
func TestWithEgressBundle(t *testing.T) {
	want := []string{"SSL_CERT_FILE=/egress/ca-bundle.pem", "REQUESTS_CA_BUNDLE=/egress/ca-bundle.pem", "CURL_CA_BUNDLE=/egress/ca-bundle.pem", "PIP_CERT=/egress/ca-bundle.pem"}
	for _, tc := range []struct {
		name string
		ch   backend.EgressChannel
		has  bool
		pem  []byte // Spec.EgressCABundle
	}{
		{"inject", fakeChannel{dir: "/run/x", bundle: "ca-bundle.pem"}, true, nil},
		{"no rules", fakeChannel{dir: "/run/x"}, false, nil},
		{"carried", fakeChannel{bundle: "ca-bundle.pem"}, true, []byte("PEM")},
		{"carried, no rules", fakeChannel{}, false, nil},
	} {
		spec := withEgress(backend.Spec{}, tc.ch)
		if !bytes.Equal(spec.EgressCABundle, tc.pem) {
			t.Errorf("%s: EgressCABundle %q, want %q", tc.name, spec.EgressCABundle, tc.pem)
		}
		env := spec.Env
		for _, w := range want {
			if slices.Contains(env, w) != tc.has {
				t.Errorf("%s: %s in the environment: got %v, want %v (%q)", tc.name, w, !tc.has, tc.has, env)
			}
		}
	}
}
