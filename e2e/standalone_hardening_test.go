package e2e_test

// Issue 20, item 5 (and a guard for item 7), against the real image started with docs/standalone.md's docker
// run line: what the start-up check refuses that it let through before.

import (
	"strings"
	"testing"
)

// saRefused starts the image with flags and wants exit 1 with want in stderr, one
// missing lock reported, and no ready server.
func saRefused(t *testing.T, img string, flags []string, want string) {
	t.Helper()
	code, stderr, err := saRun(t, img, flags, nil)
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("got exit %d (%v), stderr:\n%s\nwant exit 1 and %q", code, err, stderr, want)
	}
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "standalone lock ") {
			n++
		}
	}
	if n != 1 || strings.Contains(stderr, "backend ready") {
		t.Errorf("got %d missing locks reported (want exactly 1), or a ready server:\n%s", n, stderr)
	}
}

// TestStandaloneRefusesUnconfinedSeccomp: docs/standalone.md's line with --security-opt
// seccomp=unconfined (every other lock present) is refused, naming the lock and the
// flag to drop.
func TestStandaloneRefusesUnconfinedSeccomp(t *testing.T) {
	img := saImage(t)
	saRefused(t, img, append(append([]string(nil), saLocked...), "--security-opt", "seccomp=unconfined"),
		`"runtime seccomp profile" missing: Seccomp is "0" in /proc/self/status, want 2`)
}

// TestStandaloneNoWritablePlaceSurvives: under docs/standalone.md's line, every place the
// server's user can write (found by walking the whole filesystem from a run, kernel
// views aside) is wiped: a marker run N leaves in each is gone in run N+1.
func TestStandaloneNoWritablePlaceSurvives(t *testing.T) {
	img := saImage(t)
	s := saSession(t, img)
	const walk = `
import os
skip = ("/proc", "/sys", "/dev/pts")
places = []
for root, dirs, files in os.walk("/"):
    if root.startswith(skip):
        dirs[:] = []
        continue
    if os.access(root, os.W_OK):
        places.append(root)
`
	r := saExec(t, s, walk+`
n = 0
for p in places:
    try:
        with open(os.path.join(p, ".mcpx-marker"), "w") as f:
            f.write("x")
        n += 1
    except OSError:
        pass
print("places", n, sorted(places)[:20])
`, 0)
	if !strings.Contains(saLine(t, r, "places "), "/tmp") {
		t.Fatalf("run N found no writable place, not even /tmp: %q", r.Stdout)
	}
	r = saExec(t, s, `
import os
found = []
for root, dirs, files in os.walk("/"):
    if root.startswith(("/proc", "/sys")):
        dirs[:] = []
        continue
    if ".mcpx-marker" in files:
        found.append(root)
print("found", found)
`, 0)
	if got := saLine(t, r, "found "); got != "[]" {
		t.Errorf("run N+1 found run N's markers in %s", got)
	}
}
