package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// FuzzAllowName: no host name panics, every refusal is a *Denial, and an allowed name
// is in canonical form and is no address.
func FuzzAllowName(f *testing.F) {
	for _, s := range []string{
		"pypi.org", "files.pythonhosted.org", "PyPI.org.", "127.0.0.1", "[::1]", "2130706433",
		"0x7f.1", "xn--bcher-kva.de", "bücher.de", "１２７.０.０.１", "a..b", "*.com", "",
		"localhost", "\x00", "xn--", "a.b.c.d.e.pythonhosted.org", strings.Repeat("a.", 200),
	} {
		f.Add(s, 443)
	}
	p := mustProfile(f, `{"profiles": {"p": {"hosts": ["pypi.org", "*.pythonhosted.org", "bücher.de"], "ports": [443, 8443]}}}`, "p")
	f.Fuzz(func(t *testing.T, host string, port int) {
		name, d := p.allow(host, port)
		err := p.AllowName(host, port)
		if (d == nil) != (err == nil) {
			t.Fatalf("allow and AllowName disagree on %q: %v vs %v", host, d, err)
		}
		if err != nil {
			var den *Denial
			if !errors.As(err, &den) || den.Reason == "" || err.Error() == "" {
				t.Fatalf("AllowName(%q) = %v, want a *Denial with a reason", host, err)
			}
			return
		}
		if _, perr := netip.ParseAddr(name); perr == nil || ldhProblem(name) != "" || name != strings.ToLower(name) {
			t.Fatalf("AllowName(%q) allowed non-canonical or address %q", host, name)
		}
		if name != "pypi.org" && name != "xn--bcher-kva.de" && !strings.HasSuffix(name, ".pythonhosted.org") {
			t.Fatalf("AllowName(%q) allowed %q, which the profile does not list", host, name)
		}
		if port != 443 && port != 8443 {
			t.Fatalf("AllowName(%q, %d) allowed a port the profile does not list", host, port)
		}
	})
}

// FuzzVet: no address panics Vet, and what it allows is public unicast by the
// standard library's own measure too.
func FuzzVet(f *testing.F) {
	for _, s := range []string{
		"8.8.8.8", "127.0.0.1", "::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::",
		"2606:4700::1111", "fe80::1%eth0", "::", "ff02::1", "169.254.169.254",
	} {
		a := netip.MustParseAddr(s).As16()
		f.Add(a[:], s == "fe80::1%eth0")
	}
	f.Fuzz(func(t *testing.T, b []byte, zone bool) {
		var ip netip.Addr
		switch len(b) {
		case 4:
			ip = netip.AddrFrom4([4]byte(b))
		case 16:
			ip = netip.AddrFrom16([16]byte(b))
		default:
			return
		}
		if zone && ip.Is6() {
			ip = ip.WithZone("eth0")
		}
		err := Vet(ip, own)
		if err == nil {
			u := ip.Unmap()
			if u.IsLoopback() || u.IsPrivate() || u.IsLinkLocalUnicast() || u.IsMulticast() ||
				u.IsUnspecified() || u.IsInterfaceLocalMulticast() || !u.IsGlobalUnicast() || u.Zone() != "" {
				t.Fatalf("Vet(%s) allowed a non-public address", ip)
			}
			return
		}
		var d *Denial
		if !errors.As(err, &d) || d.Reason != ReasonAddressRefused || d.Addr != ip {
			t.Fatalf("Vet(%s) = %v, want a *Denial for the address", ip, err)
		}
	})
}
