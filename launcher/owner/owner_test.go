package owner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// fakeProc is a /proc with the given boot id, the reader's pid namespace and pid, and
// a stat (start time) for each pid in procs.
func fakeProc(t *testing.T, boot string, ns uint64, self int, procs map[int]uint64) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "sys", "kernel", "random"), 0o755))
	must(os.WriteFile(filepath.Join(root, "sys", "kernel", "random", "boot_id"), []byte(boot+"\n"), 0o644))
	for pid, start := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		must(os.MkdirAll(filepath.Join(dir, "ns"), 0o755))
		must(os.Symlink(fmt.Sprintf("pid:[%d]", ns), filepath.Join(dir, "ns", "pid")))
		// A command name with a space and a parenthesis, as a program may choose.
		stat := fmt.Sprintf("%d (mcp) exec) S 1 %d %d 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 %d 1000 100\n", pid, pid, pid, start)
		must(os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	}
	must(os.Symlink(strconv.Itoa(self), filepath.Join(root, "self")))
	return root
}

func TestSelf(t *testing.T) {
	root := fakeProc(t, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 4026531836, 42, map[int]uint64{42: 123456})
	got, err := Proc{Root: root}.Self("ws1")
	if err != nil {
		t.Fatal(err)
	}
	want := ID{Host: HostHash("ws1"), Boot: "0f1e2d3c4b5a6978", PidNS: 4026531836, Pid: 42, Start: 123456}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	back, err := Parse(got.String())
	if err != nil || back != got {
		t.Errorf("Parse(%q): got %+v, %v, want %+v", got, back, err, got)
	}
	if n := len(got.String()); n > 63 {
		t.Errorf("label value of %d characters, want at most 63", n)
	}
}

// TestSelfReal reads this machine's /proc: the ID names this test process.
func TestSelfReal(t *testing.T) {
	me, err := Proc{}.Self("h")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if me.Pid != os.Getpid() {
		t.Errorf("got pid %d, want %d", me.Pid, os.Getpid())
	}
	if v := (Proc{}).Judge(me, ID{Host: me.Host, Boot: me.Boot, PidNS: me.PidNS, Pid: os.Getppid(), Start: 1}); v != Gone {
		t.Errorf("the parent's pid with another start time: got %v, want gone", v)
	}
	parent, err := Proc{}.start(os.Getppid())
	if err != nil {
		t.Fatal(err)
	}
	if v := (Proc{}).Judge(me, ID{Host: me.Host, Boot: me.Boot, PidNS: me.PidNS, Pid: os.Getppid(), Start: parent}); v != Alive {
		t.Errorf("the parent: got %v, want alive", v)
	}
}

func TestJudge(t *testing.T) {
	const boot, ns = "00112233-4455-6677-8899-aabbccddeeff", 4026531836
	root := fakeProc(t, boot, ns, 10, map[int]uint64{10: 500, 20: 700})
	self := ID{Host: HostHash("ws1"), Boot: "0011223344556677", PidNS: ns, Pid: 10, Start: 500}
	other := func(f func(o *ID)) ID {
		o := self
		o.Pid, o.Start = 20, 700
		f(&o)
		return o
	}
	esrch := func(int) error { return syscall.ESRCH }
	eperm := func(int) error { return syscall.EPERM }
	for _, tc := range []struct {
		name    string
		o       ID
		signal0 func(int) error
		want    Verdict
	}{
		{"itself", self, esrch, Self},
		{"a live peer (another stdio server)", other(func(*ID) {}), esrch, Alive},
		{"a dead server: its pid absent", other(func(o *ID) { o.Pid = 30 }), esrch, Gone},
		{"a dead server: its pid reused", other(func(o *ID) { o.Start = 600 }), esrch, Gone},
		{"absent from a hidepid /proc but answering", other(func(o *ID) { o.Pid = 30 }), eperm, Unknown},
		{"the same pid and start in another pid namespace", other(func(o *ID) { o.PidNS = ns + 1 }), esrch, Unknown},
		{"a dead pid in another pid namespace", other(func(o *ID) { o.PidNS, o.Pid = ns+1, 30 }), esrch, Unknown},
		{"another host", other(func(o *ID) { o.Host, o.Pid = HostHash("ws2"), 30 }), esrch, Unknown},
		{"another host, another boot", other(func(o *ID) { o.Host, o.Boot = HostHash("ws2"), "ffffffffffffffff" }), esrch, Unknown},
		{"this host before a reboot", other(func(o *ID) { o.Boot = "ffffffffffffffff" }), esrch, Gone},
		{"this host before a reboot, another namespace", other(func(o *ID) { o.Boot, o.PidNS = "ffffffffffffffff", 7 }), esrch, Gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Proc{Root: root, Signal0: tc.signal0}).Judge(self, tc.o); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{"", "default", "a.b.c.d.e", "0011aabb.0011223344556677.1.0.5",
		"0011aabb.0011223344556677.1.2", "0011AABG.0011223344556677.1.2.3", "0011aabb.00112233.1.2.3"} {
		if o, err := Parse(s); err == nil {
			t.Errorf("Parse(%q): got %+v, want an error", s, o)
		}
	}
}

func TestContainer(t *testing.T) {
	const id = "63c06307348c77d6df27712c3636e8aae87e67fc57dc5860529abce89c14d81a"
	for _, tc := range []struct{ name, mountinfo, want string }{
		{"docker", "209 192 254:0 /var/lib/docker/containers/" + id + "/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw\n" +
			"210 192 254:0 /var/lib/docker/containers/" + id + "/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw\n", id},
		{"podman", "512 500 0:45 /containers/storage/overlay-containers/" + id + "/userdata/hostname /etc/hostname rw - tmpfs tmpfs rw\n", id},
		{"the host", "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n", ""},
		{"a hostname mount naming no container", "210 192 254:0 /srv/hostname /etc/hostname rw - ext4 /dev/vda rw\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "1"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "1", "mountinfo"), []byte(tc.mountinfo), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("1", filepath.Join(root, "self")); err != nil {
				t.Fatal(err)
			}
			if got := (Proc{Root: root}).Container(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
