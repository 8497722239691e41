package launcher

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
)

// TestBootRefusesWritableMount: the bootstrap, started as the launcher starts it (its
// command, the sandbox's flags as docker run gives them), with one mount more that the
// program could write (a tmpfs of its own, a file bound from the host's disk), sends an
// F frame naming the mount and exits 70 before any program runs; with the same mount
// read-only, or none, it does not complain. (The kubelet's /dev/termination-log was
// such a file: launcher/kube's TestLiveTerminationMessageUnreachable.)
func TestBootRefusesWritableMount(t *testing.T) {
	_ = enginetest.Client(t) // fails under CI without an engine
	o := Options{}.withDefaults()
	o.Preload = nil // the check runs before any import
	file := t.TempDir() + "/motd"
	if err := exec.Command("sh", "-c", "touch "+file+" && chmod 0666 "+file).Run(); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", "--rm", "-i", "--network", "none", "--read-only", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--user", "65532:65532", "--workdir", WorkDir,
		"--tmpfs", WorkDir + ":rw,noexec,nosuid,nodev,size=16m",
		// as the Docker backend does: Podman adds writable tmpfs mounts here under --read-only
		"--tmpfs", "/run:ro", "--tmpfs", "/var/tmp:ro",
		"--label", LabelRole + "=sandbox", "--label", LabelInstance + "=test-boot-mounts"}
	run := func(extra ...string) (int, string) {
		args := append(append(append([]string(nil), base...), extra...), "--entrypoint", o.Python, o.Image)
		args = append(args, bootCommand(o)[1:]...)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "docker", args...)
		cmd.Stdin = strings.NewReader("") // no header: a bootstrap that got that far fails on it
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("docker run: %v\n%s", err, errb.String())
		}
		return code, out.String() + errb.String()
	}
	for _, tc := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"tmpfs", []string{"--tmpfs", "/data:mode=1777"}, "/data (tmpfs): the directory /data is writable"},
		{"file from the host's disk", []string{"-v", file + ":/etc/motd"}, "/etc/motd ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The F frame comes first (before any R frame: nothing was forked, the
			// program never ran). The exit status is not asserted: the docker CLI's
			// `run --rm` against Podman's API reported 0 where Docker reports 70.
			code, out := run(tc.extra...)
			if !strings.HasPrefix(out, "F") || !strings.Contains(out, "writable mounts outside the wipe") || !strings.Contains(out, tc.want) {
				t.Fatalf("got exit %d, output %q; want an F frame first, naming %q", code, out, tc.want)
			}
		})
	}
	t.Run("read-only or none", func(t *testing.T) {
		for _, extra := range [][]string{nil, {"--tmpfs", "/data:ro,mode=1777", "-v", file + ":/etc/motd:ro"}} {
			if _, out := run(extra...); strings.Contains(out, "outside the wipe") {
				t.Errorf("with %q: got %q, want no complaint about mounts", extra, out)
			}
		}
	})
}
