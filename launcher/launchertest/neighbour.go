package launchertest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// Neighbour starts, with the docker CLI at path docker, a container of user ("uid:gid")
// beside the test holding tasks processes that sleep (tasks of that uid on this host
// outside any sandbox: what RLIMIT_NPROC counts against a run of the same uid), and
// returns its id once all of them run. It is removed when the test ends.
func Neighbour(t testing.TB, docker, user string, tasks int) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), docker, "run", "-d", "--rm", "--user", user, "--network", "none", "--cap-drop", "ALL",
		launcher.DefaultImage, "python3", "-c", fmt.Sprintf(`
import os, time
for _ in range(%d):
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
print("ready", flush=True)
time.sleep(300)
`, tasks-1)).Output()
	if err != nil {
		t.Fatalf("docker run (the neighbour): %v", err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
		defer cancel()
		_ = exec.CommandContext(ctx, docker, "rm", "-f", id).Run()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if logs, _ := exec.CommandContext(t.Context(), docker, "logs", id).Output(); strings.Contains(string(logs), "ready") {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("the neighbour never started its %d processes", tasks)
		}
	}
}
