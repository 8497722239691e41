package launcher_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/probe"
)

// sessionRunner runs each job as the first call of a new session, closed after it:
// the probes then look at a session's sandbox.
type sessionRunner struct{ l *launcher.Launcher }

func (r sessionRunner) Run(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	s, err := r.l.OpenSession(ctx, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})
	if err != nil {
		return launcher.Result{}, err
	}
	defer s.Close()
	return s.Exec(ctx, job)
}

// sessionDifferences are the probes that see a session's own holder process (the
// interpreter the call was forked from: the same caller's, docs/sessions.md): the
// error each gives, which must be this one and no other.
var sessionDifferences = map[string]string{
	"daemon_not_persisted":  "processes other than the bootstrap and the program: [", // the holder
	"fds_only_std":          "open file descriptors beyond 0-2: ['7->pipe:",          // the holder's cell and event pipes
	"bootstrap_unreachable": "parent is ",                                            // the holder, not PID 1
}

// TestSessionInvariants runs every probe of the sandbox contract in a session's
// sandbox, as TestInvariants does in one-shot sandboxes; three see the session's
// holder (sessionDifferences), the rest must pass.
func TestSessionInvariants(t *testing.T) {
	l, _ := invariantsLauncher(t, invariantOptions)
	p := probe.ParamsOf(l.Options())
	p.CanaryName, p.CanaryValue = "MCP_EXEC_PROBE_CANARY_"+strings.ToUpper(randHex(t, 4)), randHex(t, 16)
	if err := os.Setenv(p.CanaryName, p.CanaryValue); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(p.CanaryName) })
	p.HostAddrs = hostAddrs(t)
	p.Token = randHex(t, 6)
	for _, pr := range probe.All(p) {
		t.Run(pr.Name, func(t *testing.T) {
			t.Parallel()
			res, evidence, err := probe.Run(t.Context(), sessionRunner{l}, l, pr)
			if errors.Is(err, probe.ErrNoHostView) {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s: %v (CI runs the tests on the engine's host)", pr.Name, err)
				}
				t.Skipf("%s not checked: %v", pr.Name, err)
			}
			if want, ok := sessionDifferences[pr.Name]; ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: got %v, want the documented difference %q", pr.Name, err, want)
				}
				t.Logf("%s: documented difference in a session: %v", pr.Name, err)
				return
			}
			if err != nil {
				t.Fatalf("%s does not hold in a session: %s\n  result: exit %d, signal %d, oom %v, timed out %v, state %q\n  outside:\n%s\n  stdout:\n%s\n  stderr:\n%s",
					pr.Name, err, res.ExitCode, res.Signal, res.OOMKilled, res.TimedOut, res.SessionState,
					indent(evidence), indent(res.Stdout), indent(res.Stderr))
			}
		})
	}
}
