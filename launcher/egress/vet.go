package egress

import (
	"net/netip"
)

type addrClass struct {
	prefix netip.Prefix
	what   string
}

func classes(pairs ...string) []addrClass {
	cs := make([]addrClass, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		cs = append(cs, addrClass{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return cs
}

// metadata are the cloud metadata services' addresses: they fall in refused ranges
// anyway, and are named so a denial says what was asked for.
var metadata = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OCI, OpenStack
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS over IPv6
}

// refused4 are the IPv4 ranges that are not public unicast destinations (the IANA
// special-purpose registry, RFC 6890 and its updates), most specific first where
// they overlap.
var refused4 = classes(
	"0.0.0.0/32", "unspecified address",
	"0.0.0.0/8", `"this network" address`,
	"10.0.0.0/8", "private address",
	"100.64.0.0/10", "shared (CGNAT) address",
	"127.0.0.0/8", "loopback address",
	"169.254.0.0/16", "link-local address",
	"172.16.0.0/12", "private address",
	"192.0.0.0/24", "IETF protocol assignment",
	"192.0.2.0/24", "documentation address",
	"192.88.99.0/24", "deprecated 6to4 relay address",
	"192.168.0.0/16", "private address",
	"198.18.0.0/15", "benchmarking address",
	"198.51.100.0/24", "documentation address",
	"203.0.113.0/24", "documentation address",
	"224.0.0.0/4", "multicast address",
	"255.255.255.255/32", "broadcast address",
	"240.0.0.0/4", "reserved address",
)

// refused6 are the IPv6 ranges refused outright. The forms that embed an IPv4 address
// a translator or relay would forward to (IPv4-mapped, NAT64 64:ff9b::/96, 6to4) are
// unwrapped before this table; everything outside 2000::/3 not unwrapped is refused
// after it.
var refused6 = classes(
	"::/128", "unspecified address",
	"::1/128", "loopback address",
	"::/96", "deprecated IPv4-compatible address",
	"64:ff9b:1::/48", "local-use NAT64 address",
	"100::/64", "discard-only address",
	"2001::/32", "Teredo address",
	"2001::/23", "IETF protocol assignment",
	"2001:db8::/32", "documentation address",
	"3fff::/20", "documentation address",
	"5f00::/16", "SRv6 segment identifier",
	"fc00::/7", "unique local address",
	"fe80::/10", "link-local address",
	"fec0::/10", "deprecated site-local address",
	"ff00::/8", "multicast address",
)

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// Vet refuses ip unless it is a public unicast address that is none of own (the
// server's own addresses and networks). The refusal is a *Denial with
// ReasonAddressRefused whose Detail names the class. IPv4-mapped, NAT64 and 6to4
// addresses are judged by the IPv4 address they embed; other IPv4-embedding and
// tunnelling forms (IPv4-compatible, local-use NAT64, Teredo) are refused whole.
func Vet(ip netip.Addr, own []netip.Prefix) error {
	if d := vet(ip, own); d != nil {
		return d
	}
	return nil
}

func vet(ip netip.Addr, own []netip.Prefix) *Denial {
	switch {
	case !ip.IsValid():
		return refuse(ip, "invalid address")
	case ip.Zone() != "":
		return refuse(ip, "scoped address")
	case ip.Is4In6():
		return embedded(ip, ip.Unmap(), "IPv4-mapped", own)
	case ip.Is4():
		return vet4(ip, ip, own)
	}
	if d := vetOwn(ip, ip, own); d != nil {
		return d
	}
	b := ip.As16()
	switch {
	case metadata[ip]:
		return refuse(ip, "metadata address")
	case nat64.Contains(ip):
		return embedded(ip, netip.AddrFrom4([4]byte(b[12:16])), "NAT64", own)
	case sixToFour.Contains(ip):
		return embedded(ip, netip.AddrFrom4([4]byte(b[2:6])), "6to4", own)
	}
	for _, c := range refused6 {
		if c.prefix.Contains(ip) {
			return refuse(ip, c.what)
		}
	}
	if !globalUnicast6.Contains(ip) {
		return refuse(ip, "not a global unicast address")
	}
	return nil
}

// embedded vets the IPv4 address v4 that ip embeds, naming the form in the denial.
func embedded(ip, v4 netip.Addr, form string, own []netip.Prefix) *Denial {
	if d := vetOwn(ip, ip, own); d != nil {
		return d
	}
	if d := vet4(ip, v4, own); d != nil {
		d.Detail = form + " address embedding a refused IPv4 address: " + d.Detail
		return d
	}
	return nil
}

// vet4 vets the IPv4 address v4; ip is the address asked about, for the denial.
func vet4(ip, v4 netip.Addr, own []netip.Prefix) *Denial {
	if metadata[v4] {
		return refuse(ip, "metadata address")
	}
	if d := vetOwn(ip, v4, own); d != nil {
		return d
	}
	for _, c := range refused4 {
		if c.prefix.Contains(v4) {
			return refuse(ip, c.what)
		}
	}
	return nil
}

func vetOwn(ip, a netip.Addr, own []netip.Prefix) *Denial {
	for _, p := range own {
		if p.Contains(a) || p.Addr().Is4In6() && p.Bits() >= 96 &&
			netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Contains(a) {
			return refuse(ip, "the server's own address")
		}
	}
	return nil
}

func refuse(ip netip.Addr, what string) *Denial {
	return &Denial{Reason: ReasonAddressRefused, Detail: what, Addr: ip}
}
