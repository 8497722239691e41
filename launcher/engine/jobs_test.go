package engine_test

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// TestSSHConnFailure: when ssh fails, the error carries its reason and counts as the
// engine being unreachable.
func TestSSHConnFailure(t *testing.T) {
	engine.FakeSSH(t, "echo 'Host key verification failed.' >&2; exit 255")
	cli, err := engine.NewClientNoEnv("ssh://ci@engine.example")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l := launchertest.Unchecked(t, cli, launcher.Options{Image: "x", Instance: "test-ssh-failure"})
	err = l.Check(t.Context())
	if err == nil || !strings.Contains(err.Error(), "Host key verification failed.") || !strings.Contains(err.Error(), "exit status 255") {
		t.Fatalf("err = %v, want ssh's reason and status", err)
	}
	if !errors.Is(err, launcher.ErrEngineUnavailable) || !strings.Contains(err.Error(), "ssh://engine.example") {
		t.Errorf("err = %v, want launcher.ErrEngineUnavailable naming the host", err)
	}
}

// TestSSHThroughFakeSSH runs jobs through the ssh:// connection code against the
// local engine, with an `ssh` that runs `docker system dial-stdio` locally: the
// connection, attach, half-close and clean-up paths, without an ssh server (the
// remoteengine-tagged test uses a real one).
func TestSSHThroughFakeSSH(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no docker CLI")
		}
		t.Skip("no docker CLI")
	}
	// The CLI under the fake talks to the local engine: whatever DOCKER_HOST the test
	// runs with (the product removes DOCKER_HOST from ssh's environment).
	local := os.Getenv("DOCKER_HOST")
	args := engine.FakeSSH(t, "DOCKER_HOST="+strconv.Quote(local)+" exec docker system dial-stdio")
	t.Setenv("DOCKER_HOST", "ssh://ci@engine.example:2222")
	t.Run("jobs", func(t *testing.T) {
		l := launchertest.New(t, launcher.Options{Instance: "test-ssh-fake"})
		runRemoteJobs(t, l)
		if len(engine.SSHChildren()) == 0 {
			t.Error("no connection process seen while the client is open: the leftover check below would prove nothing")
		}
	})
	b, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	want := "-o ConnectTimeout=30 -o BatchMode=yes -T -l ci -p 2222 -- engine.example docker system dial-stdio"
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || slices.IndexFunc(lines, func(s string) bool { return s != want }) >= 0 {
		t.Errorf("ssh ran %d times with %q, want several, each with %q", len(lines), lines, want)
	}
	engine.AssertNoSSHChildren(t)
}

// runRemoteJobs runs a few jobs that exercise the connection: output, stdin
// (half-close), exit codes, a timeout, two at once.
func runRemoteJobs(t *testing.T, l *launcher.Launcher) {
	t.Helper()
	big := strings.Repeat("0123456789", 20000)
	tests := []struct {
		name     string
		job      launcher.Job
		wantOut  string
		wantExit int
		timedOut bool
	}{
		{name: "hello", job: launcher.Job{Code: "print('hello over the remote engine')"}, wantOut: "hello over the remote engine\n"},
		{name: "stdin", job: launcher.Job{Code: "import sys; d = sys.stdin.read(); print(len(d), d[:10])", Stdin: big}, wantOut: "200000 0123456789\n"},
		{name: "exit code", job: launcher.Job{Code: "import sys; sys.exit(7)"}, wantExit: 7},
		{name: "timeout", job: launcher.Job{Code: "import time; time.sleep(30)", Timeout: 2 * time.Second}, wantExit: -1, timedOut: true},
	}
	for _, tt := range tests {
		start := time.Now()
		res, err := l.Run(t.Context(), tt.job)
		t.Logf("%s: %v", tt.name, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.TimedOut != tt.timedOut || !tt.timedOut && (res.Stdout != tt.wantOut || res.ExitCode != tt.wantExit) {
			t.Errorf("%s: got exit %d, timed out %v, stdout %q; want exit %d, timed out %v, stdout %q",
				tt.name, res.ExitCode, res.TimedOut, res.Stdout, tt.wantExit, tt.timedOut, tt.wantOut)
		}
	}
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			res, err := l.Run(t.Context(), launcher.Job{Code: "print(6 * 7)"})
			if err == nil && res.Stdout != "42\n" {
				err = errors.New("concurrent job " + strconv.Itoa(i) + " printed " + strconv.Quote(res.Stdout))
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
