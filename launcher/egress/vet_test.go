package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// own is what a server might pass: its host's addresses and the networks it sits on.
var own = []netip.Prefix{
	netip.MustParsePrefix("203.0.114.7/32"),
	netip.MustParsePrefix("2a01:4f8:1:2::/64"),
}

func TestVetAllowed(t *testing.T) {
	for _, s := range []string{
		"1.1.1.1", "8.8.8.8", "151.101.0.223", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "192.0.1.255", "192.169.0.1", "198.17.255.255",
		"198.20.0.0", "203.0.114.6", "223.255.255.255", "11.0.0.1", "169.253.255.255",
		"2606:4700:4700::1111", "2a04:4e42::223", "2a01:4f8:1:3::1",
		"::ffff:8.8.8.8",   // IPv4-mapped, a public IPv4 address
		"64:ff9b::808:808", // NAT64 of 8.8.8.8
		"2002:808:808::1",  // 6to4 of 8.8.8.8
		"2001:200::1",      // just past 2001::/23
		"3fff:1000::1",     // just past 3fff::/20
		"2001:db9::1",      // just past 2001:db8::/32
	} {
		if err := Vet(netip.MustParseAddr(s), own); err != nil {
			t.Errorf("Vet(%s) = %v, want nil", s, err)
		}
	}
}

func TestVetRefused(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"169.254.0.1", "link-local"},
		{"169.254.169.254", "metadata"},
		{"169.254.170.2", "metadata"},
		{"100.100.100.200", "metadata"},
		{"192.0.0.8", "IETF"},
		{"192.0.2.1", "documentation"},
		{"198.51.100.1", "documentation"},
		{"203.0.113.1", "documentation"},
		{"192.88.99.1", "6to4 relay"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.254", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"203.0.114.7", "own"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "IPv4-mapped address embedding a refused IPv4 address: loopback"},
		{"::ffff:169.254.169.254", "metadata"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"::ffff:203.0.114.7", "own"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"::8.8.8.8", "IPv4-compatible"},
		{"64:ff9b::a9fe:a9fe", "NAT64 address embedding a refused IPv4 address: metadata"},
		{"64:ff9b::7f00:1", "NAT64 address embedding a refused IPv4 address: loopback"},
		{"64:ff9b::a00:1", "private"},
		{"64:ff9b::cb00:7207", "own"},
		{"64:ff9b:1::808:808", "local-use NAT64"},
		{"2002:7f00:0001::", "6to4 address embedding a refused IPv4 address: loopback"},
		{"2002:a9fe:a9fe::1", "metadata"},
		{"2002:c0a8:0101::1", "private"},
		{"2002:6440:1::1", "CGNAT"},
		{"2001::1", "Teredo"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001:2::1", "IETF"},
		{"2001:10::1", "IETF"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"100::1", "discard"},
		{"5f00::1", "SRv6"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"fd00:ec2::254", "metadata"},
		{"fe80::1", "link-local"},
		{"febf::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
		{"ff05::1:3", "multicast"},
		{"::ffff:0:7f00:1", "not a global unicast"}, // IPv4-translated (RFC 2765)
		{"4000::1", "not a global unicast"},
		{"1::1", "not a global unicast"},
		{"e000::1", "not a global unicast"},
		{"2a01:4f8:1:2::1", "own"},
		{"fe80::1%eth0", "scoped"},
		{"2606:4700::1%1", "scoped"},
	} {
		ip := netip.MustParseAddr(tc.addr)
		err := Vet(ip, own)
		var d *Denial
		if !errors.As(err, &d) {
			t.Errorf("Vet(%s) = %v, want a *Denial", tc.addr, err)
			continue
		}
		if d.Reason != ReasonAddressRefused || d.Addr != ip || !strings.Contains(strings.ReplaceAll(d.Detail, "server's own", "own"), tc.want) {
			t.Errorf("Vet(%s) = %+v, want %s with %q and the address", tc.addr, d, ReasonAddressRefused, tc.want)
		}
		if strings.Contains(err.Error(), tc.addr) {
			t.Errorf("Vet(%s) text %q holds the address", tc.addr, err)
		}
	}
	if err := Vet(netip.Addr{}, nil); err == nil || !strings.Contains(err.Error(), "invalid address") {
		t.Errorf("Vet(zero Addr) = %v, want invalid address", err)
	}
}

// TestVetOwnMapped: a server address given as IPv4 is refused in its mapped and
// embedded spellings, and one given mapped is refused as IPv4 too.
func TestVetOwnMapped(t *testing.T) {
	v4 := []netip.Prefix{netip.MustParsePrefix("8.8.4.4/32")}
	mapped := []netip.Prefix{netip.MustParsePrefix("::ffff:8.8.4.4/128")}
	for _, tc := range []struct {
		own  []netip.Prefix
		addr string
	}{
		{v4, "8.8.4.4"}, {v4, "::ffff:8.8.4.4"}, {v4, "64:ff9b::808:404"}, {v4, "2002:808:404::"},
		{mapped, "::ffff:8.8.4.4"}, {mapped, "8.8.4.4"}, {mapped, "64:ff9b::808:404"},
	} {
		if err := Vet(netip.MustParseAddr(tc.addr), tc.own); err == nil || !strings.Contains(err.Error(), "own") {
			t.Errorf("Vet(%s, %v) = %v, want the server's own address", tc.addr, tc.own, err)
		}
	}
}
