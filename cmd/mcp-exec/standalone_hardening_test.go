package main

// Issue 20, items 5 and 7, against the real image started with the README's docker
// run line: what the start-up check refuses that it let through before.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// saRefused starts the image with flags and wants exit 1 with want in stderr, one
// missing lock reported, and no ready server.
func saRefused(t *testing.T, img string, flags []string, want string) {
	t.Helper()
	args := append(append([]string{"run", "--rm", "-i", "--name", saName(t)}, flags...), img)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdin = strings.NewReader("")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 1 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("got exit %d (%v), stderr:\n%s\nwant exit 1 and %q", code, err, stderr.String(), want)
	}
	n := 0
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "standalone lock ") {
			n++
		}
	}
	if n != 1 || strings.Contains(stderr.String(), "backend ready") {
		t.Errorf("got %d missing locks reported (want exactly 1), or a ready server:\n%s", n, stderr.String())
	}
}

// TestStandaloneRefusesUnconfinedSeccomp: the README's line with --security-opt
// seccomp=unconfined (every other lock present) is refused, naming the lock and the
// flag to drop.
func TestStandaloneRefusesUnconfinedSeccomp(t *testing.T) {
	img := saImage(t)
	saRefused(t, img, append(append([]string(nil), saLocked...), "--security-opt", "seccomp=unconfined"),
		`"runtime seccomp profile" missing: Seccomp is "0" in /proc/self/status, want 2`)
}

// TestStandaloneRefusesWritableMounts: the README's line plus a writable place the
// wipe does not cover is refused, naming the mount: a docker volume of the test's
// own (made writable for the server's user), a tmpfs, and a bind of a file that holds
// data.
func TestStandaloneRefusesWritableMounts(t *testing.T) {
	img := saImage(t)
	vol := saName(t) // a name of the test's own; the volume is removed at the end
	if out, err := exec.Command("docker", "volume", "create", vol).CombinedOutput(); err != nil {
		t.Fatalf("creating the volume: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", vol).Run() })
	if out, err := exec.Command("docker", "run", "--rm", "--network", "none", "-v", vol+":/v", "--user", "0:0", "--entrypoint", "chmod", img, "1777", "/v").CombinedOutput(); err != nil {
		t.Fatalf("making the volume writable: %v: %s", err, out)
	}
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, []byte("operator data\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(file, 0o666)
	for _, tc := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"volume", []string{"-v", vol + ":/data"}, `"no writable mount outside the wipe" missing: /data (`},
		{"tmpfs", []string{"--tmpfs", "/var/cache:mode=1777,size=1m"}, `"no writable mount outside the wipe" missing: /var/cache (tmpfs, read-write): the directory /var/cache is writable`},
		{"file with data", []string{"-v", file + ":/etc/mcp-exec-data"}, `"no writable mount outside the wipe" missing: /etc/mcp-exec-data (`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saRefused(t, img, append(append([]string(nil), saLocked...), tc.extra...), tc.want)
		})
	}
	if b, _ := os.ReadFile(file); string(b) != "operator data\n" {
		t.Errorf("the refused server changed the bound file: %q", b)
	}
}

// TestStandaloneTerminationLogWiped: Kubernetes' /dev/termination-log (an empty 0666
// file bound from the node's disk; here a file of the test's own) is accepted and
// named in the start-up log; what run N writes there, run N+1 does not find, and the
// file on the host is empty after the run.
func TestStandaloneTerminationLogWiped(t *testing.T) {
	img := saImage(t)
	file := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(file, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(file, 0o666)
	s := saSession(t, img, "-v", file+":/dev/termination-log")
	r := saExec(t, s, `
with open("/dev/termination-log", "w") as f:
    f.write("run N: secret 12345")
print("wrote", open("/dev/termination-log").read())
`, 0)
	if got := saLine(t, r, "wrote "); got != "run N: secret 12345" {
		t.Fatalf("run N could not write the termination log (%q): the test proves nothing", got)
	}
	r = saExec(t, s, `print("found", repr(open("/dev/termination-log").read()))`, 0)
	if got := saLine(t, r, "found "); got != "''" {
		t.Errorf("run N+1 found %s in /dev/termination-log, want nothing", got)
	}
	if b, _ := os.ReadFile(file); len(b) != 0 {
		t.Errorf("the termination log on the host holds %q after the runs", b)
	}
}

// TestStandaloneNoWritablePlaceSurvives: under the README's line, every place the
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
