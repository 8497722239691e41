package egress

import (
	"fmt"
	"net/netip"
	"strconv"
)

// Reason says why a connection was refused, as a stable code a program can match.
type Reason string

// The reasons a Denial carries.
const (
	ReasonInvalidName     Reason = "invalid_name"     // not a valid DNS name
	ReasonIPLiteral       Reason = "ip_literal"       // an address where a name was expected
	ReasonSpecialName     Reason = "special_name"     // localhost, .internal, .arpa, ...
	ReasonHostNotAllowed  Reason = "host_not_allowed" // not in the profile
	ReasonPortNotAllowed  Reason = "port_not_allowed" // not in the profile's ports
	ReasonAddressRefused  Reason = "address_refused"  // a resolved address Vet refused
	ReasonResolveFailed   Reason = "resolve_failed"   // the lookup failed
	ReasonNoAddress       Reason = "no_address"       // the lookup returned nothing
	ReasonConnectionLimit Reason = "connection_limit" // the per-call connection cap
	ReasonByteLimit       Reason = "byte_limit"       // the per-call byte cap
)

// Denial is the error of every refusal in this package. Its Error text holds only the
// reason, the host, the port and a short detail written by this package (an address
// class, a profile's name, a cap), so it can be printed in a 403 body; the host is
// quoted, so it cannot break a header. Addr and Err are for the server's logs and are
// never part of the text.
type Denial struct {
	Reason Reason
	Host   string     // the canonical name when known, else as asked; may be empty
	Port   int        // 0 when not known
	Detail string     // e.g. "loopback address", "profile \"pypi\""
	Addr   netip.Addr // the refused address, for ReasonAddressRefused
	Err    error      // the resolver's error, for ReasonResolveFailed
}

func (d *Denial) Error() string {
	s := "egress denied (" + string(d.Reason) + ")"
	if d.Host != "" {
		h := d.Host
		if len(h) > 80 {
			h = h[:80] + "..."
		}
		s += " " + strconv.Quote(h)
		if d.Port != 0 {
			s += " port " + strconv.Itoa(d.Port)
		}
	} else if d.Port != 0 {
		s += " port " + strconv.Itoa(d.Port)
	}
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	return s
}

// Unwrap returns the resolver's error, if any.
func (d *Denial) Unwrap() error { return d.Err }

func deny(r Reason, host string, port int, format string, args ...any) *Denial {
	return &Denial{Reason: r, Host: host, Port: port, Detail: fmt.Sprintf(format, args...)}
}
