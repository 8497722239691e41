package proxy

import (
	"context"
	"net"
	"net/netip"
)

// SetDialForTest replaces how a vetted address is dialled (live tests on a machine
// whose only way out is a gateway at a refused address).
func (s *Server) SetDialForTest(f func(ctx context.Context, a netip.AddrPort) (net.Conn, error)) {
	s.dial = f
}

// DialAddr is the real dialler.
var DialAddr = dialAddr
