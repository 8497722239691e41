package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
	"github.com/mcp-exec/mcp-exec/launcher/probe"
)

// kubeSessionDifferences are the probes that see a session's own holder process (the
// same three as launcher's TestSessionInvariants on Docker: docs/sessions.md), each with
// the error it must give. The cell holds exactly the holder's cell and event pipes: 8
// and 11 here (7 and 10 on Docker), since in PID 1 the start gate's seal pipe took fd 3,
// which the holder closed before any call (the key never reaches a call).
var kubeSessionDifferences = map[string]*regexp.Regexp{
	"daemon_not_persisted":  regexp.MustCompile(`processes other than the bootstrap and the program: \[`),
	"fds_only_std":          regexp.MustCompile(`^open file descriptors beyond 0-2: \['8->pipe:\[\d+\]', '11->pipe:\[\d+\]'\]\nexit code 1 \(signal 0\), want 0$`),
	"bootstrap_unreachable": regexp.MustCompile(`parent is `),
}

// TestKubeSessionInvariants runs every probe of the sandbox contract as the first call
// of a new session on the Kubernetes backend of the test cluster: each passes, is one of
// the backend's documented differences (the selftest's), or is one of the three a
// session's holder makes, with exactly its error.
func TestKubeSessionInvariants(t *testing.T) {
	kc, _ := e2e.KubeCluster(t)
	env := map[string]string{"MCP_EXEC_BACKEND": "kubernetes", "MCP_EXEC_KUBECONFIG": kc,
		"MCP_EXEC_KUBE_NAMESPACE": kube.DefaultNamespace, "MCP_EXEC_KUBE_IMAGE_PULL_POLICY": "Never",
		"MCP_EXEC_POOL_SIZE": "0", "MCP_EXEC_INSTANCE": "test-kube-session-probes"}
	// scripts/k8s/ci.sh installs the sandboxes' Localhost profile and names it here.
	if p := os.Getenv("MCP_EXEC_KUBE_SECCOMP_PROFILE"); p != "" {
		env["MCP_EXEC_KUBE_SECCOMP_PROFILE"] = p
	}
	cfg, err := loadConfig(flag.NewFlagSet("mcp-exec", flag.ContinueOnError), nil, mapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	l, cleanup, err := newLauncher(t.Context(), cfg, zerolog.Nop(), newMetrics(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	p := probe.ParamsOf(l.Options())
	p.CanaryName, p.CanaryValue = "MCP_EXEC_PROBE_CANARY_"+strings.ToUpper(randomHex(4)), randomHex(16)
	t.Setenv(p.CanaryName, p.CanaryValue)
	p.HostAddrs = hostAddrs()
	p.Token = randomHex(6)
	for _, pr := range probe.All(p) {
		t.Run(pr.Name, func(t *testing.T) {
			res, evidence, err := probe.Run(t.Context(), kubeSessionRunner{l}, l, pr)
			if errors.Is(err, probe.ErrNoHostView) {
				// As the selftest on this backend says: not checked, never passed.
				t.Logf("%s not checked: %v", pr.Name, err)
				return
			}
			if want, ok := kubeSessionDifferences[pr.Name]; ok {
				if err == nil || !want.MatchString(err.Error()) {
					t.Fatalf("%s: got %v, want the documented difference %s", pr.Name, err, want)
				}
				return
			}
			if err != nil && !knownDifference("kubernetes", false, pr.Name, err) {
				t.Fatalf("%s does not hold in a session: %s\n  result: exit %d, state %q\n  outside: %s\n  stdout: %s\n  stderr: %s",
					pr.Name, err, res.ExitCode, res.SessionState, evidence, res.Stdout, res.Stderr)
			}
		})
	}
}

// kubeSessionRunner runs each job as the first call of a new session, closed after it.
type kubeSessionRunner struct{ l *launcher.Launcher }

func (r kubeSessionRunner) Run(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	s, err := r.l.OpenSession(ctx, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})
	if err != nil {
		return launcher.Result{}, err
	}
	defer s.Close()
	return s.Exec(ctx, job)
}
