// The sandbox contract, run: every probe of launcher/probe goes through the real
// launcher and the real engine. This file is an external test package because
// launcher/probe imports launcher; invariantsLauncher below does what testLauncher
// (integration_test.go) does, through the exported API.
package launcher_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/launcher/probe"
)

// invariantOptions are deliberately not the defaults, so that the probes show the
// configured limits are the ones enforced. Prestart: in the warm-pool runs
// (MCP_EXEC_TEST_POOL_SIZE) the bash and JavaScript probes run in the interpreters a
// pooled sandbox started ahead, and the Python ones after those were killed (a cold
// sandbox starts none).
var invariantOptions = launcher.Options{
	Memory:    160 * launcher.MiB,
	Pids:      64,
	CPUs:      0.5,
	TmpfsSize: 24 * launcher.MiB,
	Prestart:  []string{"bash", "javascript"},
}

// invariantsLauncher is launchertest.New, with the engine's client for the tests
// that look at containers from outside.
func invariantsLauncher(t *testing.T, opts launcher.Options) (*launcher.Launcher, *client.Client) {
	t.Helper()
	return launchertest.New(t, opts), launchertest.Client(t)
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// hostAddrs are this host's own addresses, which no sandbox may reach. (The tests
// run on the engine's host, or at least next to it.)
func hostAddrs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Logf("listing the host's addresses: %v", err)
		return nil
	}
	var out []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() || n.IP.IsUnspecified() {
			continue
		}
		if s := n.IP.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestInvariants runs every probe of the sandbox contract in its own sandbox, in each
// language.
func TestInvariants(t *testing.T) {
	l, _ := invariantsLauncher(t, invariantOptions)

	// A variable of the server's process that no sandbox may see.
	canaryName, canaryValue := "MCP_EXEC_PROBE_CANARY_"+strings.ToUpper(randHex(t, 4)), randHex(t, 16)
	if err := os.Setenv(canaryName, canaryValue); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(canaryName) })

	p := probe.ParamsOf(l.Options())
	p.CanaryName, p.CanaryValue = canaryName, canaryValue
	p.HostAddrs = hostAddrs(t)
	p.Token = randHex(t, 6)
	t.Logf("limits: memory %d, pids %d, cpus %.2f, tmpfs %d; host addresses %v", p.Memory, p.Pids, p.CPUs, p.TmpfsSize, p.HostAddrs)

	// The Python set, then each other language's (the interpreter the bootstrap execs
	// keeps the sandbox).
	for _, pr := range append(probe.All(p), probe.Languages(p, launcher.OtherLanguages...)...) {
		t.Run(pr.Name, func(t *testing.T) {
			if !pr.Exclusive { // an Exclusive probe runs here, before the parallel ones start
				t.Parallel()
			}
			res, evidence, err := probe.Run(t.Context(), l, l, pr)
			if errors.Is(err, probe.ErrNoHostView) {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s: %v (CI runs the tests on the engine's host)", pr.Name, err)
				}
				t.Skipf("%s not checked: %v", pr.Name, err)
			}
			if err != nil {
				t.Fatalf("%s does not hold: %s\n  claim: %s\n  result: exit %d, signal %d, oom %v, timed out %v, %v\n  outside:\n%s\n  stdout:\n%s\n  stderr:\n%s",
					pr.Name, err, pr.Claim, res.ExitCode, res.Signal, res.OOMKilled, res.TimedOut,
					res.Duration.Round(time.Millisecond), indent(evidence), indent(res.Stdout), indent(res.Stderr))
			}
			if evidence != "" {
				t.Logf("%s holds, seen from outside:\n%s", pr.Name, indent(evidence))
				return
			}
			t.Logf("%s holds (%v):\n%s", pr.Name, res.Duration.Round(time.Millisecond), indent(res.Stdout))
		})
	}
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (empty)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// TestProbesDetectWeakSandbox proves that the probes can fail: each runs in a
// container started with the docker CLI and deliberately weakened (bridge network,
// capabilities, root, writable root filesystem, no /tmp tmpfs, no limits, plus what
// the probe's case adds), and must report PROBE FAIL there. The launcher's own spec
// cannot be weakened from here, hence the CLI. The two-run probes run both their
// jobs in one reused container, which their second job must notice.
func TestProbesDetectWeakSandbox(t *testing.T) {
	// The weakening goes through the docker CLI, whose options Podman's compat API does
	// not all honour (systempaths=unconfined is ignored; run --rm exits 0): the probes'
	// ability to fail is shown against Docker.
	if cli, err := engine.NewClient(""); err == nil {
		info, err := engine.Identify(t.Context(), cli)
		cli.Close()
		if err == nil && info.IsPodman() {
			t.Skipf("engine is %s: the probe self-test runs against Docker", info)
		}
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("docker CLI: %v", err)
		}
		t.Skipf("no docker CLI: %v", err)
	}
	image := os.Getenv("MCP_EXEC_IMAGE")
	if image == "" {
		image = launcher.DefaultImage
	}
	if out, err := dockerCLI(t, docker, "", "image", "inspect", "--format", "{{.Id}}", image); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("docker image inspect %s: %v: %s", image, err, out.stderr)
		}
		t.Skipf("docker image inspect %s: %v: %s", image, err, strings.TrimSpace(out.stderr))
	}

	canaryName, canaryValue := "MCP_EXEC_PROBE_CANARY_WEAK", randHex(t, 16)
	p := probe.Params{
		Memory: 256 * launcher.MiB, Pids: 128, CPUs: 1, TmpfsSize: 16 * launcher.MiB,
		CanaryName: canaryName, CanaryValue: canaryValue, Token: randHex(t, 6),
	}
	byName := map[string]probe.Probe{}
	for _, pr := range append(probe.All(p), probe.Languages(p, launcher.OtherLanguages...)...) {
		byName[pr.Name] = pr
	}
	// Every capability but CAP_SYS_RESOURCE, which some engines cannot grant (a host
	// whose own bounding set lacks it fails the run with "unable to apply caps") and
	// which none of these probes is about.
	weak := []string{"--network", "bridge", "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--user", "0"}
	cases := []struct {
		probe string
		extra []string // on top of weak
		cmd   []string // instead of python3 -, reading the program on stdin
		exec  bool     // run the program with docker exec in a container that sleeps
		reuse bool     // exec Job, then Next, in one container: Next must fail
	}{
		{probe: "network_only_loopback"},
		{probe: "network_tcp_outside_unreachable"},
		{probe: "network_udp_outside_unreachable"},
		{probe: "network_dns_fails"},
		{probe: "network_host_unreachable"},
		{probe: "raw_sockets_denied"},
		{probe: "runs_as_unprivileged_user"},
		{probe: "capabilities_empty"},
		{probe: "no_new_privs"},
		{probe: "seccomp_filter_active", extra: []string{"--security-opt", "seccomp=unconfined"}},
		{probe: "seccomp_denies_dangerous_syscalls"},
		{probe: "proc_sys_read_only", extra: []string{"--security-opt", "systempaths=unconfined"}},
		{probe: "root_fs_read_only"},
		{probe: "tmp_private_noexec_capped"},
		{probe: "environment_isolated", extra: []string{"--env", canaryName + "=" + canaryValue}},
		// a socket left in the filesystem before the program starts
		{probe: "no_engine_socket", cmd: []string{"sh", "-c",
			`python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/run/engine.sock")' && exec python3 -`}},
		{probe: "fds_only_std", cmd: []string{"sh", "-c", "exec 3</etc/hostname; exec python3 -"}},
		// PID 1 is a plain process of the same user
		{probe: "bootstrap_unreachable", exec: true},
		{probe: "memory_limit_kills_program"},
		{probe: "memory_oom_reported_for_child"},
		{probe: "pids_limit_stops_fork_bomb"},
		{probe: "cpu_quota_enforced"},
		{probe: "tmp_not_persisted", reuse: true},
		{probe: "daemon_not_persisted", reuse: true},
		// The other languages' programs, read on stdin by their interpreters. (The tree
		// probe's first run needs the launcher's timeout; its second is a /proc scan.)
		{probe: "bash_network", cmd: bashStdin},
		{probe: "bash_privileges", cmd: bashStdin},
		{probe: "bash_filesystem", cmd: bashStdin},
		{probe: "bash_pids_limit", cmd: bashStdin},
		{probe: "bash_memory_limit", cmd: bashStdin},
		{probe: "javascript_network", cmd: nodeStdin},
		{probe: "javascript_privileges", cmd: nodeStdin},
		{probe: "javascript_filesystem", cmd: nodeStdin, extra: []string{"--security-opt", "systempaths=unconfined"}},
		{probe: "javascript_pids_limit", cmd: nodeStdin},
		{probe: "javascript_memory_limit", cmd: nodeStdin},
	}
	for _, c := range cases {
		pr, ok := byName[c.probe]
		if !ok {
			t.Fatalf("no probe %q", c.probe)
		}
		t.Run(c.probe, func(t *testing.T) {
			t.Parallel()
			name := "mcp-exec-weak-probe-" + randHex(t, 6)
			t.Cleanup(func() {
				// Normally gone already (--rm); this covers a killed docker run and
				// the reused containers.
				_, _ = dockerCLI(t, docker, "", "rm", "-f", name)
			})
			opts := append(append([]string{"--name", name}, weak...), c.extra...)
			cmd := c.cmd
			if cmd == nil {
				cmd = []string{"python3", "-"}
			}
			var res launcher.Result
			target := pr
			if c.exec || c.reuse {
				if out, err := dockerCLI(t, docker, "", append(append([]string{"run", "-d", "--rm"}, opts...), image, "sleep", "600")...); err != nil {
					t.Fatalf("docker run: %v: %s", err, out.stderr)
				}
				execArgs := append([]string{"exec", "-i", name}, cmd...)
				if c.reuse {
					if pr.Next == nil {
						t.Fatalf("%s has no Next", pr.Name)
					}
					first := dockerResult(t, docker, pr.Job.Code, execArgs...)
					if err := pr.Check(first); err != nil {
						t.Fatalf("first run failed in the weakened container, so the second proves nothing: %v\nstdout:\n%s\nstderr:\n%s", err, indent(first.Stdout), indent(first.Stderr))
					}
					target = *pr.Next
				}
				res = dockerResult(t, docker, target.Job.Code, execArgs...)
			} else {
				res = dockerResult(t, docker, pr.Job.Code, append(append(append([]string{"run", "--rm", "-i"}, opts...), image), cmd...)...)
			}
			verdict := probe.Verdict(res.Stdout)
			checkErr := target.Check(res)
			if !strings.Contains(res.Stdout, "PROBE FAIL") || verdict == nil || checkErr == nil || res.ExitCode != 1 {
				t.Fatalf("%s did not detect the weakened sandbox (docker %s): verdict %v, check %v, exit %d\nstdout:\n%s\nstderr:\n%s",
					c.probe, strings.Join(opts[2:], " "), verdict, checkErr, res.ExitCode, indent(res.Stdout), indent(res.Stderr))
			}
			t.Logf("%s detected the weakened sandbox: %s", c.probe, firstN(verdict.Error(), 600))
		})
	}
}

var (
	bashStdin = []string{"bash", "-s"}
	nodeStdin = []string{"node", "--input-type=module"}
)

type cliOutput struct{ stdout, stderr string }

// dockerCLI runs the docker CLI with stdin and returns its output; err is an
// *exec.ExitError for a non-zero exit.
func dockerCLI(t *testing.T, docker, stdin string, args ...string) (cliOutput, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, docker, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return cliOutput{stdout.String(), stderr.String()}, err
}

// dockerResult runs a probe's program through the docker CLI and returns what it did
// as a Result. The CLI's own failures (125: the engine refused the container; 126,
// 127: no such command) fail the test.
func dockerResult(t *testing.T, docker, code string, args ...string) launcher.Result {
	t.Helper()
	out, err := dockerCLI(t, docker, code, args...)
	exit := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("docker %s: %v\nstderr:\n%s", strings.Join(args, " "), err, indent(out.stderr))
	}
	if exit >= 125 && exit <= 127 {
		t.Fatalf("docker %s: exit %d\nstderr:\n%s", strings.Join(args, " "), exit, indent(out.stderr))
	}
	return launcher.Result{Stdout: out.stdout, Stderr: out.stderr, ExitCode: exit}
}

func firstN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d more bytes)", len(s)-n)
}
