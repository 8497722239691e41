package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// tokenSHA256 is what MCP_EXEC_AUTH_TOKEN_SHA256 takes for token.
func tokenSHA256(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TestStandaloneTokenNotReadable: in standalone mode a program runs
// as the server's user, and the container's environment reaches every process started
// in it (the image's HEALTHCHECK, docker exec): a token there was found by a program
// scanning /proc/*/environ. The token in the environment is refused, naming the ways
// that work; configured as the deployments do (its SHA-256), with the healthcheck
// running every half second and `docker exec ... mcp-exec healthcheck` in a loop, a
// program scanning every /proc/*/environ and /proc/*/cmdline for 8 s finds neither the
// token nor its digest's preimage, and does find a canary in a dumpable process of its
// own (the scan would see a leak) and healthcheck processes (they ran meanwhile).
func TestStandaloneTokenNotReadable(t *testing.T) {
	img := saImage(t)

	t.Run("environment_refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		args := append([]string{"run", "--rm", "-i", "--name", saName(t)}, saLocked...)
		args = append(args, "-e", "MCP_EXEC_AUTH_TOKEN="+e2e.Random(), img)
		cmd := exec.CommandContext(ctx, "docker", args...)
		out, err := cmd.CombinedOutput()
		for _, want := range []string{"MCP_EXEC_AUTH_TOKEN is refused with the process backend", "MCP_EXEC_AUTH_TOKEN_SHA256", "MCP_EXEC_AUTH_TOKEN_FILE"} {
			if err == nil || !strings.Contains(string(out), want) {
				t.Fatalf("the token in the environment: got %v:\n%s\nwant a refusal naming %q", err, out, want)
			}
		}
	})

	t.Run("scan", func(t *testing.T) {
		token := e2e.Random()
		name := saName(t)
		s := saSessionNamed(t, img, name, "--health-interval", "500ms", "-e", "MCP_EXEC_AUTH_TOKEN_SHA256="+tokenSHA256(token))

		// An operator's docker exec, in a loop while the program scans.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		execs := 0
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				_ = exec.CommandContext(c, "docker", "exec", name, "mcp-exec", "healthcheck").Run()
				cancel()
				execs++
			}
		})
		canary := "canary" + e2e.Random()
		r := saExec(t, s, `
import os, subprocess, sys, time
token = bytes.fromhex("`+hexOf(token)+`")
canary = b"`+canary+`"
own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env={"CANARY": canary.decode()})
hits, canary_seen, health = set(), False, set()
end = time.monotonic() + 8
while time.monotonic() < end:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for what in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (pid, what), "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if token in data:
                hits.add("%s %s" % (pid, what))
            if what == "environ" and canary in data and int(pid) == own.pid:
                canary_seen = True
            if what == "cmdline" and b"healthcheck" in data:
                health.add(pid)
own.kill()
print("hits", sorted(hits))
print("canary_seen", canary_seen)
print("healthchecks", len(health))
`, 30)
		close(stop)
		wg.Wait()
		if strings.Contains(r.Stdout+r.Stderr, token) {
			t.Fatalf("the program printed the token:\n%s%s", r.Stdout, r.Stderr)
		}
		if got := saLine(t, r, "hits "); got != "[]" {
			t.Errorf("a program found the token in /proc: %s", got)
		}
		if got := saLine(t, r, "canary_seen "); got != "True" {
			t.Errorf("the scan did not find the canary in a dumpable process of its own (%s): it proves nothing", got)
		}
		n, err := strconv.Atoi(saLine(t, r, "healthchecks "))
		if err != nil || n == 0 {
			t.Errorf("no healthcheck process seen during the scan (%v, %d): it proves nothing", err, n)
		}
		t.Logf("healthcheck processes seen by the scan: %d; docker exec healthchecks run: %d", n, execs)
		if r.ExitCode != 0 {
			t.Errorf("the scan: %+v", r)
		}
	})
}

func hexOf(s string) string { return hex.EncodeToString([]byte(s)) }
