package launcher

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// TestReapByOwner: with an owner, the reaper and the sweep remove another owner's
// sandbox of the instance only when that owner is proven gone, or cannot be judged and
// the sandbox ended longer than the grace ago; unlabelled ones only at start; a live
// owner's and an unjudgeable running one never. Against the real engine's list and
// states, with this machine's /proc.
func TestReapByOwner(t *testing.T) {
	cli := enginetest.Client(t)
	log := zerolog.New(zerolog.NewTestWriter(t))
	host, _ := os.Hostname()
	me, err := owner.Proc{}.Self(host)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	instance := "test-reap-owner"
	l, err := New(testBackend(t, cli, log), Options{Image: os.Getenv("MCP_EXEC_IMAGE"), Instance: instance, Owner: me, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := l.Check(ctx); err != nil {
		engineSkipOrFail(t, "engine check: %v", err)
	}
	l.orph.grace = time.Hour

	peer := me // the test's parent (go test) stands for a live server on this host
	peer.Pid = os.Getppid()
	peer.Start = startOf(t, peer.Pid)
	dead := peer
	dead.Start++ // the parent's pid, another start time: a server gone, its pid reused
	foreign := peer
	foreign.PidNS++ // a server in another PID namespace

	// run starts a container with labels (a sandbox) or without (a server's own), and
	// waits for its end unless running.
	run := func(labels map[string]string, running bool) string {
		t.Helper()
		cmd := []string{"python3", "-c", "import time; time.sleep(300)"}
		if !running {
			cmd = []string{"python3", "-c", "pass"}
		}
		c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config:     &container.Config{Image: l.opts.Image, Cmd: cmd, Labels: labels},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
		})
		if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		if !running {
			wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
			select {
			case <-wait.Result:
			case err := <-wait.Error:
				t.Fatal(err)
			}
		}
		return c.ID
	}
	mkIn := func(label, serverContainer string, running bool) string {
		t.Helper()
		labels := map[string]string{LabelRole: "sandbox", LabelInstance: instance}
		if label != "" {
			labels[backend.LabelOwner] = label
		}
		if serverContainer != "" {
			labels[backend.LabelOwnerContainer] = serverContainer
		}
		return run(labels, running)
	}
	mk := func(label string, running bool) string { return mkIn(label, "", running) }
	// Servers in containers of this engine (another PID namespace: Judge cannot tell):
	// one running since before its sandbox was made, one stopped, one restarted after.
	up, down, again := run(nil, true), run(nil, false), run(nil, true)
	ids := map[string]string{
		"foreign owner in a running container":   mkIn(foreign.String(), up, true),
		"foreign owner in a stopped container":   mkIn(foreign.String(), down, true),
		"foreign owner in a restarted container": mkIn(foreign.String(), again, true),
		"live peer, running":                     mk(peer.String(), true),
		"live peer, ended":                       mk(peer.String(), false),
		"dead owner, running":                    mk(dead.String(), true),
		"foreign owner, running":                 mk(foreign.String(), true),
		"foreign owner, ended":                   mk(foreign.String(), false),
		"unlabelled, running":                    mk("", true),
		"garbled owner label, running":           mk("x.y", true),
	}
	exists := func() map[string]bool {
		t.Helper()
		all, err := l.be.List(ctx, instance)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for name, id := range ids {
			m[name] = slices.Contains(all, id)
		}
		return m
	}
	time.Sleep(2 * time.Second) // beyond the second of margin on Created
	if _, err := cli.ContainerRestart(ctx, again, client.ContainerRestartOptions{Timeout: new(0)}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want map[string]bool) {
		t.Helper()
		got := exists()
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: sandbox %q exists %v, want %v", when, name, got[name], w)
			}
		}
	}

	// The sweep while running: the dead owner's; not the unlabelled one (only a start
	// removes those); the foreign ended one not before its grace.
	l.sweepOrphans(ctx, false)
	check("first sweep", map[string]bool{"foreign owner in a running container": true, "foreign owner in a stopped container": false,
		"foreign owner in a restarted container": false, "live peer, running": true, "live peer, ended": true, "dead owner, running": false,
		"foreign owner, running": true, "foreign owner, ended": true, "unlabelled, running": true, "garbled owner label, running": true})

	l.orph.grace = time.Second // past for the ended one
	if _, err := l.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	check("start after the grace", map[string]bool{"live peer, running": true, "live peer, ended": true,
		"foreign owner, running": true, "foreign owner, ended": false, "unlabelled, running": false, "garbled owner label, running": true})

	if own, err := l.Sandboxes(ctx); err != nil || len(own) != 0 {
		t.Errorf("this launcher's sandboxes: got %v, %v, want none (every one listed is another owner's)", own, err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	check("after Close", map[string]bool{"foreign owner in a running container": true, "live peer, running": true, "live peer, ended": true, "foreign owner, running": true})
}

// startOf is pid's start time, field 22 of its stat.
func startOf(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
