package e2e_test

// Issue 20, item 7: the wipe between runs covers /tmp, /dev/shm, /dev/mqueue and
// System V IPC; any other mount a run can write carries what it leaves there to the next
// run (or to the host's disk), so the start-up check refuses one.

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// saVolume is a Docker volume of this test's own, removed at its end.
func saVolume(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("mcpx-mounts-%d-%d", os.Getpid(), saSeq.Add(1))
	if out, err := exec.Command("docker", "volume", "create", name).CombinedOutput(); err != nil {
		t.Fatalf("docker volume create: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", name).Run() })
	return name
}

// TestStandaloneRefusesWritableMountOutsideWipe: the seed's line with one mount more
// that runs could write (a tmpfs the operator adds, even one the copy-up leaves root's
// and 0755, as Docker does for --tmpfs /var/cache:mode=1777; a volume) must not start,
// and the refusal names the mount. The same mounts read-only start.
func TestStandaloneRefusesWritableMountOutsideWipe(t *testing.T) {
	img := saImage(t)
	vol := saVolume(t)
	const lock = `"no writable mount outside the wipe" missing: `
	for _, tc := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"tmpfs over an image directory", []string{"--tmpfs", "/var/cache:mode=1777"}, lock + "/var/cache (tmpfs): a directory mounted read-write"},
		{"tmpfs of its own", []string{"--tmpfs", "/data:mode=1777"}, lock + "/data (tmpfs): a directory mounted read-write"},
		{"volume", []string{"-v", vol + ":/srv/data"}, lock + "/srv/data ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saRefused(t, img, append(append([]string(nil), saLocked...), tc.extra...), tc.want)
		})
	}
	t.Run("read-only mounts start", func(t *testing.T) {
		code, stderr := saStart(t, img, append(append([]string(nil), saLocked...), "--tmpfs", "/data:ro", "-v", vol+":/srv/data:ro"))
		if code != 0 || !strings.Contains(stderr, "process backend ready") || strings.Contains(stderr, `"no writable mount outside the wipe" missing`) {
			t.Fatalf("got exit %d, stderr:\n%s\nwant a start", code, stderr)
		}
	})
}

// carryWrite is run N: a file in every directory outside /proc and /sys that the run
// can write, but its own (removed after it), holding a secret.
const carryWrite = `
import os
n = 0
def walk(d):
    global n
    try:
        entries = list(os.scandir(d))
    except OSError:
        return
    if os.access(d, os.W_OK) and d != os.getcwd():
        try:
            with open(os.path.join(d, "carry-over-%d" % n), "w") as f:
                f.write("secret of run N")
            n += 1
        except OSError:
            pass
    for e in entries:
        if e.is_dir(follow_symlinks=False) and e.path not in ("/proc", "/sys") and not e.path.startswith(os.getcwd()):
            walk(e.path)
walk("/")
print("wrote", n)
`

// carryRead is run N+1: every file named carry-over-* anywhere outside /proc and /sys.
const carryRead = `
import os
found = []
for d, dirs, files in os.walk("/"):
    dirs[:] = [x for x in dirs if os.path.join(d, x) not in ("/proc", "/sys")]
    found += [os.path.join(d, f) for f in files if f.startswith("carry-over-")]
print("found", sorted(found))
`

// TestStandaloneNothingCarriesOver: what run N writes in every directory it can write
// is gone in run N+1, under the seed's line. With a writable tmpfs more the server
// must refuse to start: where it did start (before the check), run N+1 read run N's
// files there.
func TestStandaloneNothingCarriesOver(t *testing.T) {
	img := saImage(t)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"seed", nil},
		{"with a writable tmpfs more", []string{"--tmpfs", "/data:mode=1777"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.extra != nil {
				code, stderr := saStart(t, img, append(append([]string(nil), saLocked...), tc.extra...))
				if code == 1 && strings.Contains(stderr, `"no writable mount outside the wipe" missing: /data (tmpfs)`) {
					return // refused: no run could carry anything over
				}
				t.Logf("not refused (exit %d): runs follow", code)
			}
			s := saSession(t, img, tc.extra...)
			w := saExec(t, s, carryWrite, 60)
			if w.ExitCode != 0 {
				t.Fatalf("run N: %+v", w)
			}
			r := saExec(t, s, carryRead, 60)
			if got := saLine(t, r, "found "); got != "[]" {
				t.Fatalf("run N+1 found run N's files (run N wrote %s): %s", saLine(t, w, "wrote "), got)
			}
		})
	}
}
