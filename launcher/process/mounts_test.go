package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadMountinfo(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(f, []byte(
		"541 470 0:53 / / ro,relatime master:1 - overlay overlay rw,lowerdir=x\n"+
			"542 541 0:56 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"+
			"550 541 0:60 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=65536k\n"+
			"551 541 8:1 /var/lib/docker/volumes/v/_data /my\\040data rw,relatime - ext4 /dev/sda1 rw\n"+
			"552 541 8:1 /var/lib/docker/containers/c/hosts /etc/hosts rw,relatime - ext4 /dev/sda1 rw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readMountinfo(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []mountInfo{{"/", "overlay", false}, {"/proc", "proc", true}, {"/tmp", "tmpfs", true}, {"/my data", "ext4", true}, {"/etc/hosts", "ext4", true}}
	if !cmp.Equal(got, want, cmp.AllowUnexported(mountInfo{})) {
		t.Errorf("readMountinfo: got %+v, want %+v", got, want)
	}
}

// TestCheckMounts: a writable directory mount, and one with a writable directory
// deep inside, are refused by name; an empty writable file is covered (and the wipe's
// truncateCovered empties it); a file holding data is refused; read-only mounts,
// kernel views and /tmp pass. (The test runs as root on the host, for whom every
// read-write mount is writable; the image tests check the unwritable case.)
func TestCheckMounts(t *testing.T) {
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	deep := filepath.Join(dir, "deep", "a", "b")
	for _, d := range []string{vol, deep} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	empty, full := filepath.Join(dir, "termination-log"), filepath.Join(dir, "config")
	if err := os.WriteFile(empty, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte("operator data"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused, cov := checkMounts([]mountInfo{
		{"/tmp", "tmpfs", true}, {"/proc", "proc", true}, {vol, "ext4", false},
		{vol, "ext4", true}, {empty, "ext4", true}, {full, "ext4", true},
		{filepath.Join(dir, "missing"), "ext4", true},
	})
	if len(refused) != 2 || !strings.HasPrefix(refused[0], vol+" (ext4, read-write): the directory "+vol+" is writable") ||
		!strings.HasPrefix(refused[1], full+" (ext4, read-write): a file of 13 bytes") {
		t.Errorf("refused: got %q", refused)
	}
	if !cmp.Equal(cov, []string{empty}) {
		t.Errorf("covered: got %v, want [%s]", cov, empty)
	}
	setCovered(cov)
	t.Cleanup(func() { setCovered(nil) })
	if err := os.WriteFile(empty, []byte("run N was here"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := truncateCovered(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(empty); len(b) != 0 {
		t.Errorf("after truncateCovered the covered file holds %q", b)
	}
	if b, _ := os.ReadFile(full); string(b) != "operator data" {
		t.Errorf("an uncovered file was changed: %q", b)
	}
}
