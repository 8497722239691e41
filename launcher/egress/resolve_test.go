package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder is a Resolver that answers from a table and records every lookup.
type recorder struct {
	mu      sync.Mutex
	answers map[string][]string // rooted name -> addresses
	err     error
	calls   []string
}

func (r *recorder) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, network+" "+host)
	if r.err != nil {
		return nil, r.err
	}
	var out []netip.Addr
	for _, s := range r.answers[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

var _ Resolver = (*net.Resolver)(nil) // the real one fits

func TestResolve(t *testing.T) {
	p := mustProfile(t, `{"profiles": {"p": {"hosts": ["pypi.org", "*.pythonhosted.org", "rebind.example.com", "*.evil.example.net"]}}}`, "p")
	r := &recorder{answers: map[string][]string{
		"pypi.org.":                       {"151.101.0.223", "2a04:4e42::223", "::ffff:151.101.64.223"},
		"files.pythonhosted.org.":         {"151.101.1.63"},
		"rebind.example.com.":             {"8.8.8.8", "127.0.0.1"}, // a mixed answer
		"loop.evil.example.net.":          {"127.0.0.1"},
		"meta.evil.example.net.":          {"169.254.169.254"},
		"mapped.evil.example.net.":        {"::ffff:127.0.0.1"},
		"nat64.evil.example.net.":         {"64:ff9b::a9fe:a9fe"},
		"sixtofour.evil.example.net.":     {"2002:7f00:0001::"},
		"ula.evil.example.net.":           {"fd00:ec2::254"},
		"own.evil.example.net.":           {"203.0.114.7"},
		"ownv6.evil.example.net.":         {"2a01:4f8:1:2::99"},
		"nothing.evil.example.net.":       {},
		"linklocal6.evil.example.net.":    {"fe80::1"},
		"multicast.evil.example.net.":     {"224.0.0.251"},
		"compatible.evil.example.net.":    {"::169.254.169.254"},
		"private.evil.example.net.":       {"10.0.0.1", "10.0.0.2"},
		"cgnat.evil.example.net.":         {"100.64.0.1"},
		"documentation.evil.example.net.": {"192.0.2.1"},
	}}
	got, err := p.Resolve(t.Context(), r, "PyPI.org.", 443, own)
	if err != nil {
		t.Fatalf("Resolve(pypi.org) = %v", err)
	}
	want := []netip.AddrPort{
		netip.MustParseAddrPort("151.101.0.223:443"),
		netip.MustParseAddrPort("[2a04:4e42::223]:443"),
		netip.MustParseAddrPort("151.101.64.223:443"), // dialled as IPv4
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("Resolve(pypi.org) (-want +got):\n%s", diff)
	}
	if got, err := p.Resolve(t.Context(), r, "files.pythonhosted.org", 443, own); err != nil || len(got) != 1 {
		t.Errorf("Resolve(files.pythonhosted.org) = %v, %v, want one address", got, err)
	}
	// The lookups were of the canonical name, rooted so no search domain is appended.
	if diff := cmp.Diff([]string{"ip pypi.org.", "ip files.pythonhosted.org."}, r.calls); diff != "" {
		t.Errorf("lookups (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		host   string
		want   Reason
		detail string
	}{
		{"rebind.example.com", ReasonAddressRefused, "loopback"},
		{"loop.evil.example.net", ReasonAddressRefused, "loopback"},
		{"meta.evil.example.net", ReasonAddressRefused, "metadata"},
		{"mapped.evil.example.net", ReasonAddressRefused, "IPv4-mapped address embedding a refused IPv4 address: loopback"},
		{"nat64.evil.example.net", ReasonAddressRefused, "NAT64 address embedding a refused IPv4 address: metadata"},
		{"sixtofour.evil.example.net", ReasonAddressRefused, "6to4 address embedding a refused IPv4 address: loopback"},
		{"ula.evil.example.net", ReasonAddressRefused, "metadata"},
		{"own.evil.example.net", ReasonAddressRefused, "own"},
		{"ownv6.evil.example.net", ReasonAddressRefused, "own"},
		{"linklocal6.evil.example.net", ReasonAddressRefused, "link-local"},
		{"multicast.evil.example.net", ReasonAddressRefused, "multicast"},
		{"compatible.evil.example.net", ReasonAddressRefused, "IPv4-compatible"},
		{"private.evil.example.net", ReasonAddressRefused, "private"},
		{"cgnat.evil.example.net", ReasonAddressRefused, "CGNAT"},
		{"documentation.evil.example.net", ReasonAddressRefused, "documentation"},
		{"nothing.evil.example.net", ReasonNoAddress, "no address"},
	} {
		before := len(r.calls)
		got, err := p.Resolve(t.Context(), r, tc.host, 443, own)
		var d *Denial
		if !errors.As(err, &d) || got != nil {
			t.Errorf("Resolve(%s) = %v, %v, want nil and a *Denial", tc.host, got, err)
			continue
		}
		if d.Reason != tc.want || !strings.Contains(d.Detail, tc.detail) || d.Host != tc.host || d.Port != 443 {
			t.Errorf("Resolve(%s) = %+v, want %s with %q for the host and port", tc.host, d, tc.want, tc.detail)
		}
		if len(r.calls) != before+1 {
			t.Errorf("Resolve(%s) made %d lookups, want 1", tc.host, len(r.calls)-before)
		}
		if !strings.HasPrefix(err.Error(), `egress denied (`+string(tc.want)+`) "`+tc.host+`" port 443: `) {
			t.Errorf("Resolve(%s) text %q", tc.host, err)
		}
	}
}

// TestResolveNoLookupWhenRefused: a refused name or port causes no DNS query at all,
// so a sandbox cannot use the proxy's resolver as a channel.
func TestResolveNoLookupWhenRefused(t *testing.T) {
	p := mustProfile(t, pypiFile, "pypi")
	r := &recorder{answers: map[string][]string{}}
	for _, tc := range []struct {
		host string
		port int
		want Reason
	}{
		{"secret-data.attacker.example.com", 443, ReasonHostNotAllowed},
		{"c2VjcmV0.pypi.org", 443, ReasonHostNotAllowed},
		{"pypi.org", 53, ReasonPortNotAllowed},
		{"127.0.0.1", 443, ReasonIPLiteral},
		{"2130706433", 443, ReasonIPLiteral},
		{"127。0。0。1", 443, ReasonIPLiteral},
		{"[::ffff:169.254.169.254]", 443, ReasonIPLiteral},
		{"localhost", 443, ReasonSpecialName},
		{"pypi.org.internal", 443, ReasonSpecialName},
		{"bad_name.pypi.org", 443, ReasonInvalidName},
		{"pythonhosted.org", 443, ReasonHostNotAllowed},
	} {
		_, err := p.Resolve(t.Context(), r, tc.host, tc.port, own)
		var d *Denial
		if !errors.As(err, &d) || d.Reason != tc.want {
			t.Errorf("Resolve(%q, %d) = %v, want %s", tc.host, tc.port, err, tc.want)
		}
	}
	if len(r.calls) != 0 {
		t.Errorf("refused names were looked up: %q", r.calls)
	}
}

func TestResolveFailure(t *testing.T) {
	p := mustProfile(t, pypiFile, "pypi")
	inner := &net.DNSError{Err: "no such host", Name: "pypi.org.", Server: "10.0.0.2:53", IsNotFound: true}
	_, err := p.Resolve(t.Context(), &recorder{err: inner}, "pypi.org", 443, own)
	var d *Denial
	if !errors.As(err, &d) || d.Reason != ReasonResolveFailed {
		t.Fatalf("Resolve = %v, want %s", err, ReasonResolveFailed)
	}
	if !errors.Is(err, inner) {
		t.Errorf("Resolve error does not wrap the resolver's error")
	}
	if strings.Contains(err.Error(), "10.0.0.2") || strings.Contains(err.Error(), "no such host") {
		t.Errorf("denial text %q holds the resolver's message", err)
	}

	// A cancelled context reaches the resolver, whose error is reported the same way.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = p.Resolve(ctx, &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return nil, errors.New("no network in this test")
	}}, "pypi.org", 443, own)
	if !errors.As(err, &d) || d.Reason != ReasonResolveFailed {
		t.Errorf("Resolve(cancelled) = %v, want %s", err, ReasonResolveFailed)
	}
}
