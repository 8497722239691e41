package process

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seedMountinfo is /proc/self/mountinfo of the standalone image under the seed's docker
// run line (measured, cgroup v1, options shortened), with what an operator might add:
// a tmpfs (--tmpfs /var/cache:mode=1777: the copy-up leaves it root's, 0755), a
// volume, a read-only bind, the kubelet's files and a mount point with a space.
const seedMountinfo = `1 0 0:1 / / ro,relatime - overlay overlay rw,lowerdir=/l
2 1 0:2 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
3 1 0:3 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
4 3 0:4 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
5 1 0:5 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
6 5 0:6 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
7 3 0:7 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw
8 3 0:8 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
9 1 0:9 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=65536k
10 1 8:1 /c/resolv.conf /etc/resolv.conf ro,relatime - ext4 /dev/sda1 rw
11 1 8:1 /c/hosts /etc/hosts rw,relatime - ext4 /dev/sda1 rw
12 2 0:3 /null /proc/keys rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
13 1 0:10 / /var/cache rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw
14 1 8:1 /v/data /srv/my\040data rw,relatime - ext4 /dev/sda1 rw
15 3 8:1 /p/c/1 /dev/termination-log rw,relatime - ext4 /dev/sda1 rw
16 1 8:1 /p/c/2 /root/termination-log rw,relatime - ext4 /dev/sda1 rw
17 1 8:1 /v/ro /srv/ro ro,relatime - ext4 /dev/sda1 rw
18 1 0:11 / /srv/rosuper rw,relatime - tmpfs tmpfs ro
19 9 0:12 / /tmp/sub rw,relatime - tmpfs tmpfs rw
`

func TestParseMountinfo(t *testing.T) {
	got := parseMountinfo([]byte(seedMountinfo))
	if len(got) != 19 {
		t.Fatalf("parsed %d mounts, want 19: %+v", len(got), got)
	}
	if m := got[13]; m != (mountEntry{Point: "/srv/my data", FSType: "ext4"}) {
		t.Errorf("escaped mount point: got %+v", m)
	}
	if !got[0].ReadOnly || !got[17].ReadOnly || got[2].ReadOnly {
		t.Errorf("read-only flags (per mount, then superblock): got %+v", got)
	}
}

// TestMountsOutsideWipe: of the seed's mounts none counts; every one the operator or
// the kubelet adds that a run can write counts, named, whatever the directory's mode.
func TestMountsOutsideWipe(t *testing.T) {
	files := map[string]bool{"/etc/hosts": false, "/dev/termination-log": true, "/root/termination-log": false}
	devWritable := ""
	p := mountProbe{
		isDir: func(path string) bool { _, file := files[path]; return !file },
		writable: func(path string) bool {
			w, ok := files[path]
			if !ok {
				t.Errorf("writable(%q): asked of a directory mount, whose mode must not matter", path)
			}
			return w
		},
		walkDev: func(skip map[string]bool) string {
			for _, s := range []string{"/dev/pts", "/dev/shm", "/dev/mqueue", "/dev/termination-log"} {
				if !skip[s] {
					t.Errorf("walkDev: %s not skipped", s)
				}
			}
			return devWritable
		},
	}
	got := mountsOutsideWipe(parseMountinfo([]byte(seedMountinfo)), []string{"/tmp", "/dev/shm", "/dev/mqueue"}, p)
	want := []string{
		"/var/cache (tmpfs): a directory mounted read-write",
		"/srv/my data (ext4): a directory mounted read-write",
		"/dev/termination-log (ext4): a file mounted read-write that runs can write",
	}
	if !cmp.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	devWritable = "/dev/leftover"
	got = mountsOutsideWipe(parseMountinfo([]byte(seedMountinfo)), []string{"/tmp", "/dev/shm", "/dev/mqueue"}, p)
	if len(got) != 4 || got[0] != "/dev (tmpfs): /dev/leftover is writable" {
		t.Errorf("a writable file on /dev itself: got %q", got)
	}
}
