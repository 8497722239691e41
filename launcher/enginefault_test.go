//go:build enginefault

// The engine-restart test stops and restarts the machine's Docker engine, so it runs
// only when asked for (go test -tags enginefault), alone: scripts/test.sh runs it after
// the main suite.

package launcher

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestEngineRestart(t *testing.T) {
	l := testLauncher(t, Options{PoolSize: 2})
	for deadline := time.Now().Add(60 * time.Second); l.PoolStats().Idle < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool never filled: %+v", l.PoolStats())
		}
	}

	type outcome struct {
		res Result
		err error
	}
	inflight := make(chan outcome, 1)
	go func() {
		res, err := l.Run(context.Background(), Job{Code: "import time\nprint('up', flush=True)\ntime.sleep(30)"})
		inflight <- outcome{res, err}
	}()
	time.Sleep(time.Second)

	t.Log("stopping dockerd")
	if out, err := exec.Command("pkill", "-TERM", "-x", "dockerd").CombinedOutput(); err != nil {
		t.Fatalf("pkill dockerd: %v %s", err, out)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = exec.Command("bash", "../scripts/engine.sh").Run()
		}
	})
	for deadline := time.Now().Add(60 * time.Second); exec.Command("docker", "version").Run() == nil; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("dockerd did not stop")
		}
	}
	for deadline := time.Now().Add(60 * time.Second); exec.Command("pgrep", "-x", "dockerd").Run() == nil; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("dockerd did not exit")
		}
	}

	o := <-inflight
	// The exec in flight either reports the engine as unreachable or, if the engine
	// stopped its container before going away, a sandbox stopped from outside.
	if o.err != nil && !errors.Is(o.err, ErrEngineUnavailable) {
		t.Errorf("exec in flight: got error %v, want ErrEngineUnavailable", o.err)
	}
	if o.err == nil && !strings.Contains(o.res.Stderr, "sandbox was stopped") {
		t.Errorf("exec in flight: got result %+v, want an error or a stopped-sandbox note", o.res)
	}
	t.Logf("exec in flight: err=%v exit=%d", o.err, o.res.ExitCode)

	_, err := l.Run(t.Context(), Job{Code: "print(1)"})
	if !errors.Is(err, ErrEngineUnavailable) || !strings.Contains(err.Error(), "docker.sock") {
		t.Errorf("exec while down: got %v, want ErrEngineUnavailable naming the socket", err)
	}

	t.Log("starting dockerd")
	if out, err := exec.Command("bash", "../scripts/engine.sh").CombinedOutput(); err != nil {
		t.Fatalf("engine.sh: %v %s", err, out)
	}
	restarted = true
	var res Result
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		res, err = l.Run(t.Context(), Job{Code: "print('back')"})
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || res.Stdout != "back\n" {
		t.Fatalf("exec after restart: got %+v, %v; want stdout back", res, err)
	}
	for deadline := time.Now().Add(60 * time.Second); l.PoolStats().Idle < 2; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool did not refill after the restart: %+v", l.PoolStats())
		}
	}
}
