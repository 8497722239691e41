package process

import (
	"os"
	"path/filepath"
	"testing"

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
	if got, want := resolvers(conf), []string{"10.96.0.10"}; !cmp.Equal(got, want) {
		t.Errorf("resolvers (loopback ones dropped): got %v, want %v", got, want)
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
