package process

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGatewaysAndResolvers(t *testing.T) {
	dir := t.TempDir()
	route := filepath.Join(dir, "route")
	// A default route via 10.213.77.1 (hex, little endian) and a link route.
	if err := os.WriteFile(route, []byte("Iface\tDestination\tGateway \tFlags\n"+
		"eth0\t00000000\t014DD50A\t0003\n"+
		"eth0\t004DD50A\t00000000\t0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := gateways(route), []string{"10.213.77.1"}; !cmp.Equal(got, want) {
		t.Errorf("gateways: got %v, want %v", got, want)
	}
	conf := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(conf, []byte("# x\nnameserver 127.0.0.11\nnameserver 10.96.0.10\nsearch svc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := resolvers(conf), []string{"127.0.0.11", "10.96.0.10"}; !cmp.Equal(got, want) {
		t.Errorf("resolvers (loopback ones kept: Docker's forwards queries out): got %v, want %v", got, want)
	}
	l := Lockdown{Probes: nil}
	if p := l.probes(); len(p) < len(DefaultProbes) {
		t.Errorf("probes: got %v, want at least the defaults", p)
	}
}

func TestIPCIDs(t *testing.T) {
	f := filepath.Join(t.TempDir(), "shm")
	if err := os.WriteFile(f, []byte(
		"       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid\n"+
			"1296257112          7  1600                  4096    31    31      0 65532 65532 65532 65532\n"+
			"         0          8  1600                  4096    31    31      0     0     0     0     0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ipcIDs(f, 1, 65532)
	if err != nil || !cmp.Equal(got, []int{7}) {
		t.Fatalf("ipcIDs: got %v, %v, want [7]", got, err)
	}
}

func TestRebaseEnv(t *testing.T) {
	got := rebaseEnv([]string{"HOME=/tmp", "MPLCONFIGDIR=/tmp/.config/matplotlib", "PATH=/usr/bin", "X=/tmpx"}, "/tmp", "/tmp/run-1")
	want := []string{"HOME=/tmp/run-1", "MPLCONFIGDIR=/tmp/run-1/.config/matplotlib", "PATH=/usr/bin", "X=/tmpx"}
	if !cmp.Equal(got, want) {
		t.Errorf("rebaseEnv: got %v, want %v", got, want)
	}
}

func TestNeighbourhood(t *testing.T) {
	_, n, _ := net.ParseCIDR("10.213.77.0/24")
	n.IP = net.ParseIP("10.213.77.200").To4()
	got := sweep(n, 8)
	want := []string{"10.213.77.1", "10.213.77.2", "10.213.77.3", "10.213.77.4", "10.213.77.199", "10.213.77.201", "10.213.77.198", "10.213.77.202"}
	if !cmp.Equal(got, want) {
		t.Errorf("sweep: got %v, want %v", got, want)
	}
	_, small, _ := net.ParseCIDR("10.0.0.0/30")
	if got := sweep(small, 64); !cmp.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Errorf("sweep of a /30: got %v", got)
	}
	arp := filepath.Join(t.TempDir(), "arp")
	if err := os.WriteFile(arp, []byte("IP address       HW type     Flags       HW address            Mask     Device\n"+
		"10.213.79.77     0x1         0x0         00:00:00:00:00:00     *        eth0\n"+
		"10.213.79.1      0x1         0x2         02:42:3d:5b:e1:b1     *        eth0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := arpPeers(arp); !cmp.Equal(got, []string{"10.213.79.77", "10.213.79.1"}) {
		t.Errorf("arpPeers: got %v", got)
	}
	d := describeReached([]string{"10.0.0.5:80", "udp:127.0.0.11:53", "peer:10.213.77.20:8000"})
	for _, w := range []string{"a child connected to 10.0.0.5:80", "a DNS query over UDP was answered by 127.0.0.11:53", "neighbours 10.213.77.20:8000"} {
		if !strings.Contains(d, w) {
			t.Errorf("describeReached: %q lacks %q", d, w)
		}
	}
}

// TestProbeUDP: a DNS server on loopback that answers NOERROR is reached; one that
// answers SERVFAIL is not; a port nobody listens on is not.
func TestProbeUDP(t *testing.T) {
	for rcode, want := range map[byte]bool{0: true, 3: true, 2: false, 5: false} {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			buf := make([]byte, 512)
			n, from, err := c.ReadFrom(buf)
			if err != nil || n < 12 {
				return
			}
			buf[2] |= 0x80
			buf[3] = buf[3]&0xf0 | rcode
			_, _ = c.WriteTo(buf[:n], from)
		}()
		if got := probeUDP(c.LocalAddr().String(), 2*time.Second); got != want {
			t.Errorf("rcode %d: probeUDP got %v, want %v", rcode, got, want)
		}
		_ = c.Close()
	}
	if probeUDP("127.0.0.1:9", time.Second) {
		t.Error("probeUDP reached 127.0.0.1:9, where nobody listens")
	}
}
