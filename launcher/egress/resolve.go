package egress

import (
	"context"
	"net/netip"
)

// Resolver looks a name up. *net.Resolver satisfies it; tests pass fakes.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Resolve checks host and port against the profile, and only then looks the name up
// with r and vets every address of the answer against Vet and own. It returns the
// addresses with the port, for the dialer to connect to one of them: the dialer must
// not look the name up again, since a second lookup is where DNS rebinding wins.
//
// A refused name or port causes no lookup at all. The name is looked up rooted
// (with a trailing dot), so a resolver never appends its search domains to it. One
// refused address refuses the whole answer: a rebinding server may mix a public
// address with a private one, and which one a dialer tries first is not ours to
// trust. Every refusal is a *Denial.
func (p *Profile) Resolve(ctx context.Context, r Resolver, host string, port int, own []netip.Prefix) ([]netip.AddrPort, error) {
	name, d := p.allow(host, port)
	if d != nil {
		return nil, d
	}
	addrs, err := r.LookupNetIP(ctx, "ip", name+".")
	if err != nil {
		return nil, &Denial{Reason: ReasonResolveFailed, Host: name, Port: port, Detail: "the name did not resolve", Err: err}
	}
	if len(addrs) == 0 {
		return nil, deny(ReasonNoAddress, name, port, "the name has no address")
	}
	out := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		if d := vet(a, own); d != nil {
			d.Host, d.Port = name, port
			d.Detail = "resolves to a refused address: " + d.Detail
			return nil, d
		}
		// An IPv4-mapped address is dialled as IPv4; say so in what is returned.
		out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(port)))
	}
	return out, nil
}
