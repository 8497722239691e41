package process

import (
	"bufio"
	"encoding/binary"
	"net"
	"os"
	"strings"
	"time"
)

// The egress proof's second half: a policy that allows DNS lets a
// program exfiltrate through queries, a policy for IPv4 says nothing of IPv6, and on
// a shared network (the compose file's internal one) every peer, the agent
// included, is reachable from a run whatever the route out. So besides Probes the
// egress child tries the container's own neighbourhood:
//
//   - every resolver of /etc/resolv.conf, loopback ones too (Docker's embedded DNS on
//     127.0.0.11 forwards queries out): a DNS query over UDP, and TCP 53 unless it is
//     on loopback (a local resolver accepts connections whatever the route out);
//   - the default gateways (TCP 53 and 80, and as a peer);
//   - the peers in /proc/net/arp and a sweep of each IPv4 subnet of the container's
//     interfaces (at most sweepMax addresses per subnet, the first of the subnet and
//     those around its own address): each as a peer, a TCP connection tried on every
//     one of neighbourPorts.
//
// All probes run at once, each bounded by the probe timeout: the whole check takes
// one timeout, about 1.5 s, whatever the list's length.

// neighbourPorts are tried on every peer: what a neighbour (an agent, a database, a
// web service, the host behind the gateway) commonly serves.
var neighbourPorts = []string{"22", "53", "80", "443", "3000", "5432", "6379", "8000", "8080", "8443"}

const sweepMax = 64

func neighbourhood() []string {
	var out []string
	for _, ns := range resolvers("/etc/resolv.conf") {
		if ip := net.ParseIP(ns); ip != nil && ip.IsLoopback() {
			// A resolver of the container's own (Docker's embedded DNS) accepts TCP
			// whatever the route out: only its answer to a query says it forwards.
			out = append(out, "udp:"+net.JoinHostPort(ns, "53"))
			continue
		}
		out = append(out, net.JoinHostPort(ns, "53"), "udp:"+net.JoinHostPort(ns, "53"))
	}
	for _, gw := range gateways("/proc/net/route") {
		out = append(out, net.JoinHostPort(gw, "53"), net.JoinHostPort(gw, "80"), "peer:"+gw)
	}
	own := map[string]bool{}
	var subnets []*net.IPNet
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				own[n.IP.String()] = true
				if n.IP.To4() != nil {
					subnets = append(subnets, n)
				}
			}
		}
	}
	peers := arpPeers("/proc/net/arp")
	for _, n := range subnets {
		peers = append(peers, sweep(n, sweepMax)...)
	}
	for _, p := range peers {
		if !own[p] {
			out = append(out, "peer:"+p)
		}
	}
	return out
}

// arpPeers are the IPv4 addresses of /proc/net/arp (complete entries or not: an
// incomplete one is a peer that was tried).
func arpPeers(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		if fs := strings.Fields(sc.Text()); !first && len(fs) > 0 && net.ParseIP(fs[0]) != nil {
			out = append(out, fs[0])
		}
	}
	return out
}

// sweep returns at most max host addresses of the IPv4 subnet n: the first max/2 of
// the subnet and those closest to n.IP, without the network and broadcast addresses.
func sweep(n *net.IPNet, max int) []string {
	ip4 := n.IP.To4()
	ones, bits := n.Mask.Size()
	if ip4 == nil || bits != 32 || ones >= 31 {
		return nil
	}
	size := uint32(1) << (32 - ones)
	base := binary.BigEndian.Uint32(ip4.Mask(n.Mask))
	self := binary.BigEndian.Uint32(ip4) - base
	seen := map[uint32]bool{}
	var out []string
	add := func(off uint32) {
		if off == 0 || off >= size-1 || seen[off] || len(out) >= max {
			return
		}
		seen[off] = true
		b := make(net.IP, 4)
		binary.BigEndian.PutUint32(b, base+off)
		out = append(out, b.String())
	}
	for off := uint32(1); off <= uint32(max/2); off++ {
		add(off)
	}
	for d := uint32(1); len(out) < max && d < size; d++ {
		if self > d {
			add(self - d)
		}
		add(self + d)
	}
	return out
}

// probeOne tries one entry and returns what answered ("" for nothing): "ADDR" for a
// TCP connection, "udp:ADDR" for a DNS answer, "peer:HOST:PORT" for a neighbour.
func probeOne(entry string, timeout time.Duration) string {
	switch {
	case strings.HasPrefix(entry, "udp:"):
		if probeUDP(strings.TrimPrefix(entry, "udp:"), timeout) {
			return entry
		}
	case strings.HasPrefix(entry, "peer:"):
		host := strings.TrimPrefix(entry, "peer:")
		found := make(chan string, len(neighbourPorts))
		for _, p := range neighbourPorts {
			go func() {
				a := net.JoinHostPort(host, p)
				if c, err := net.DialTimeout("tcp", a, timeout); err == nil {
					_ = c.Close()
					found <- a
					return
				}
				found <- ""
			}()
		}
		var hit string
		for range neighbourPorts {
			if a := <-found; a != "" && hit == "" {
				hit = "peer:" + a
			}
		}
		return hit
	default:
		if c, err := net.DialTimeout("tcp", entry, timeout); err == nil {
			_ = c.Close()
			return entry
		}
	}
	return ""
}

// dnsQuery is a standard query (id 0x6d78, recursion desired) for example.com A.
var dnsQuery = []byte{
	0x6d, 0x78, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
	7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1,
}

// probeUDP sends dnsQuery to addr and reports whether a resolver answered it:
// a reply with our id and rcode NOERROR or NXDOMAIN, which a resolver gives only once
// the query got through to the name's servers (or from what it learnt from them).
// SERVFAIL and REFUSED (a resolver with no way out) pass.
func probeUDP(addr string, timeout time.Duration) bool {
	c, err := net.DialTimeout("udp", addr, timeout)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(dnsQuery); err != nil {
		return false
	}
	buf := make([]byte, 1500)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return false
		}
		if n >= 12 && buf[0] == dnsQuery[0] && buf[1] == dnsQuery[1] && buf[2]&0x80 != 0 {
			rcode := buf[3] & 0x0f
			return rcode == 0 || rcode == 3
		}
	}
}

// describeReached says in words what the egress child reached.
func describeReached(reached []string) string {
	var tcp, udp, peers []string
	for _, r := range reached {
		switch {
		case strings.HasPrefix(r, "udp:"):
			udp = append(udp, strings.TrimPrefix(r, "udp:"))
		case strings.HasPrefix(r, "peer:"):
			peers = append(peers, strings.TrimPrefix(r, "peer:"))
		default:
			tcp = append(tcp, r)
		}
	}
	var parts []string
	if len(tcp) > 0 {
		parts = append(parts, "a child connected to "+strings.Join(tcp, ", "))
	}
	if len(udp) > 0 {
		parts = append(parts, "a DNS query over UDP was answered by "+strings.Join(udp, ", ")+" (DNS carries data out)")
	}
	if len(peers) > 0 {
		parts = append(parts, "a child reached the neighbours "+strings.Join(peers, ", ")+" (peers on the container's network, the agent's among them, are reachable from a run)")
	}
	return strings.Join(parts, "; ")
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
