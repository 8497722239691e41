package main

// Test support for this package's end-to-end tests, in one place: building the real
// binary, starting it on a free loopback port (and stopping it, checking that it left
// no sandbox and logged no token), the servers' environment, the Node clients of
// scripts/e2e (npm ci when needed, a run and its JSON report), and the rule that a
// missing piece skips outside CI and fails in it (CI=true).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

const (
	e2eVersion       = "e2e-test"
	e2eStartTimeout  = 60 * time.Second // the binary's engine check, then listening
	e2eStopTimeout   = 45 * time.Second // after SIGTERM; the server allows 30s of grace
	e2eClientTimeout = 5 * time.Minute  // one run of a Node client
	e2eNpmTimeout    = 5 * time.Minute  // npm ci
)

// e2eSkipOrFail skips outside CI and fails in CI, where a skipped test proves nothing.
func e2eSkipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "" {
		t.Skipf(format, args...)
	}
	t.Fatalf(format, args...)
}

// e2eScripts returns scripts/e2e, the Node clients' directory, with their pinned
// packages installed (e2eNpmCI).
func e2eScripts(t *testing.T) string {
	t.Helper()
	e2eSkipShort(t)
	dir, err := filepath.Abs(filepath.Join("..", "..", "scripts", "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		e2eSkipOrFail(t, "npm not found (%v): install npm to run the end-to-end tests", err)
	}
	e2eNpmCI(t, dir, npm)
	return dir
}

// e2eNode returns scripts/e2e, ready (e2eScripts), and the node that runs its clients.
func e2eNode(t *testing.T) (dir, node string) {
	t.Helper()
	dir = e2eScripts(t)
	node, err := exec.LookPath("node")
	if err != nil {
		e2eSkipOrFail(t, "node not found (%v): install Node.js 20 or later to run the end-to-end tests", err)
	}
	return dir, node
}

// e2ePassEnv returns KEY=value for each of keys set in the test's environment.
func e2ePassEnv(keys ...string) []string {
	var env []string
	for _, k := range keys {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// e2eBackendEnv is the backend selection of the test's environment, if set: the
// Kubernetes backend and its cluster (scripts/k8s/ci.sh runs the end-to-end tests that
// take it against the test cluster).
func e2eBackendEnv() []string {
	return e2ePassEnv("MCP_EXEC_BACKEND", "MCP_EXEC_KUBECONFIG", "MCP_EXEC_KUBE_CONTEXT",
		"MCP_EXEC_KUBE_NAMESPACE", "MCP_EXEC_KUBE_IMAGE_PULL_POLICY", "MCP_EXEC_KUBE_SECCOMP_PROFILE")
}

// e2eEnv is a server's whole environment: what any process needs, the engine and
// image selection if set, MCP_EXEC_TEST_RUNTIME (as for the launcher's tests) as the
// sandboxes' OCI runtime, e.g. runsc, then extra (a later KEY= wins). Nothing else
// leaks in from the test's environment.
func e2eEnv(extra ...string) []string {
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
		e2ePassEnv("DOCKER_HOST", "MCP_EXEC_IMAGE")...)
	if v := os.Getenv("MCP_EXEC_TEST_RUNTIME"); v != "" {
		env = append(env, "MCP_EXEC_RUNTIME="+v)
	}
	return append(env, extra...)
}

// e2eNpmCI runs `npm ci` in dir unless node_modules already holds every pinned
// package (dependencies and optionalDependencies) at its pinned version.
func e2eNpmCI(t *testing.T, dir, npm string) {
	t.Helper()
	var pkg struct {
		Dependencies         map[string]string `json:"dependencies"`
		OptionalDependencies map[string]string `json:"optionalDependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("%s/package.json: %v", dir, err)
	}
	var stale []string
	for _, deps := range []map[string]string{pkg.Dependencies, pkg.OptionalDependencies} {
		for name, want := range deps {
			var have struct {
				Version string `json:"version"`
			}
			b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
			if err != nil || json.Unmarshal(b, &have) != nil || have.Version != want {
				stale = append(stale, fmt.Sprintf("%s %s (%q installed)", name, want, have.Version))
			}
		}
	}
	if len(stale) == 0 {
		return
	}
	t.Logf("running npm ci in %s: wanted %s", dir, strings.Join(stale, ", "))
	ctx, cancel := context.WithTimeout(t.Context(), e2eNpmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir // npm gets the whole environment: it may need proxy and registry settings
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}

// e2eSkipShort skips a test that builds and runs the binary when go test has -short.
func e2eSkipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary: skipped with -short")
	}
}

// e2eBuild builds the binary once into a temporary directory (skipped with -short).
func e2eBuild(t *testing.T) string {
	t.Helper()
	e2eSkipShort(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
		} else {
			t.Fatalf("go not found: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "mcp-exec")
	// The first build on a fresh machine compiles every dependency without -race (the
	// flavour go vet and the tests left in the cache is -race): 210-249 s measured in CI
	// on 2 cores, with the prefetch's builds beside it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-ldflags", "-X main.version="+e2eVersion, "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func e2eRandom() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// e2eServer is a running mcp-exec serving http or sse.
type e2eServer struct {
	instance, token string
	port            int
	base            string // http://127.0.0.1:PORT
	endpoint        string // base + /mcp or /sse
	cmd             *exec.Cmd
	logs            *launchertest.Buffer
	done            chan struct{} // closed when the process has exited; then waitErr is set
	waitErr         error
	ready           bool // it answered
	once            sync.Once
}

// e2eStartError is a server that exited before it listened: its start-up check failed.
type e2eStartError struct {
	exitCode int
	logs     string
}

func (e *e2eStartError) Error() string {
	return fmt.Sprintf("the server exited with status %d before listening; its log:\n%s", e.exitCode, e.logs)
}

// e2eServe starts the binary serving transport on a free loopback port
// (e2eStartServer). A failed start-up check (the engine or the image missing) skips
// the test outside CI and fails it in CI; any other failure fails it.
func e2eServe(t *testing.T, bin string, env []string, transport, instance, token string) *e2eServer {
	t.Helper()
	return e2eServeOn(t, "127.0.0.1", bin, env, transport, instance, token)
}

// e2eServeOn is e2eServe listening on host (0.0.0.0: every interface).
func e2eServeOn(t *testing.T, host, bin string, env []string, transport, instance, token string) *e2eServer {
	t.Helper()
	s, err := e2eStartServerOn(t, host, bin, env, transport, instance, token)
	var se *e2eStartError
	if errors.As(err, &se) && se.exitCode == 1 {
		e2eSkipOrFail(t, "engine unavailable: the binary failed its start-up check (run scripts/engine.sh and scripts/images.sh):\n%s", se.logs)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// e2eStartServer starts the binary on a free loopback port and waits until it answers.
// It is stopped, and its log shown if the test failed, in t.Cleanup.
func e2eStartServer(t *testing.T, bin string, baseEnv []string, transport, instance, token string) (*e2eServer, error) {
	t.Helper()
	return e2eStartServerOn(t, "127.0.0.1", bin, baseEnv, transport, instance, token)
}

// e2eStartServerOn is e2eStartServer listening on host; it is checked at 127.0.0.1.
func e2eStartServerOn(t *testing.T, host, bin string, baseEnv []string, transport, instance, token string) (*e2eServer, error) {
	t.Helper()
	port, err := e2eFreePort()
	if err != nil {
		return nil, err
	}
	s := &e2eServer{
		instance: instance,
		token:    token,
		port:     port,
		base:     "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		logs:     &launchertest.Buffer{},
		done:     make(chan struct{}),
	}
	path := map[string]string{"http": "/mcp", "sse": "/sse"}[transport]
	s.endpoint = s.base + path
	env := append(append([]string{}, baseEnv...),
		"MCP_EXEC_TRANSPORT="+transport,
		"MCP_EXEC_ADDR="+net.JoinHostPort(host, strconv.Itoa(port)),
		"MCP_EXEC_INSTANCE="+instance,
	)
	if token != "" {
		env = append(env, "MCP_EXEC_AUTH_TOKEN="+token)
	}
	s.cmd = exec.Command(bin)
	s.cmd.Env = env
	s.cmd.Stdout = s.logs
	s.cmd.Stderr = s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.stop(t) })

	deadline := time.Now().Add(e2eStartTimeout)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-s.done:
			return nil, &e2eStartError{exitCode: s.cmd.ProcessState.ExitCode(), logs: s.logs.String()}
		default:
		}
		if resp, err := hc.Get(s.base + "/healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.ready = true
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s server not listening on %s after %s; its log:\n%s", transport, s.base, e2eStartTimeout, s.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM, waits for a clean exit, checks that no sandbox and no token
// were left behind, and shows the log if the test failed. It runs once.
func (s *e2eServer) stop(t *testing.T) {
	t.Helper()
	s.once.Do(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.done:
				if s.waitErr != nil {
					t.Errorf("server %s after SIGTERM: %v, want a clean exit", s.instance, s.waitErr)
				}
			case <-time.After(e2eStopTimeout):
				t.Errorf("server %s still running %s after SIGTERM; killing it", s.instance, e2eStopTimeout)
				s.cmd.Process.Kill()
				<-s.done
			}
		}
		logs := s.logs.String()
		if s.token != "" && strings.Contains(logs, s.token) {
			t.Errorf("server %s logged its auth token", s.instance)
		}
		// A server makes containers before it answers (the limits check's sandbox,
		// the warm pool): one that was slow to answer (a loaded machine) and was
		// stopped then is checked too, unless there is no engine (then it made none).
		if s.ready || e2eEngineAnswers() {
			e2eAssertNoContainers(t, s.instance)
		}
		if t.Failed() {
			t.Logf("log of server %s:\n%s", s.instance, logs)
		}
	})
}

func e2eFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// e2eEngineAnswers reports whether the engine answers a ping.
func e2eEngineAnswers() bool {
	cli, err := engine.NewClient("")
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{})
	return err == nil
}

// e2eAssertNoContainers checks that the engine holds no container of instance.
func e2eAssertNoContainers(t *testing.T, instance string) {
	t.Helper()
	cli, err := engine.NewClient("")
	if err != nil {
		t.Errorf("engine client: %v", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := make(client.Filters).Add("label", launcher.LabelInstance+"="+instance)
	list, err := docker.RetryProcRace(ctx, func() (client.ContainerListResult, error) {
		return cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	})
	if err != nil {
		t.Errorf("listing containers: %v", err)
		return
	}
	if n := len(list.Items); n != 0 {
		t.Errorf("%d containers of instance %s left behind, want 0", n, instance)
	}
}

// e2eReport is what client.mjs prints on stdout.
type e2eReport struct {
	OK        bool `json:"ok"`
	Transport string
	SDK       struct{ Name, Version string }
	Server    *struct{ Name, Version string }
	ConnectMS int64 `json:"connect_ms"`
	Passed    []string
	Failed    []string
	Checks    []struct {
		Name   string
		OK     bool
		MS     int64
		Detail string
	}
	Requests   json.RawMessage
	Error      string
	DurationMS int64 `json:"duration_ms"`
}

// e2eNodeRun is how a run of a Node client ended.
type e2eNodeRun struct {
	exitCode       int
	stdout, stderr string
	elapsed        time.Duration
}

// e2eClientRun is a run of client.mjs (or rich.mjs) and its report.
type e2eClientRun struct {
	e2eNodeRun
	report e2eReport
}

// e2eRunClient runs client.mjs with env as its whole environment.
func e2eRunClient(t *testing.T, node, dir string, env []string, args ...string) e2eClientRun {
	t.Helper()
	return e2eRunScript(t, "client.mjs", node, dir, env, args...)
}

// e2eRunScript runs a Node client that reports like client.mjs (e2eRunNode).
func e2eRunScript(t *testing.T, script, node, dir string, env []string, args ...string) e2eClientRun {
	t.Helper()
	var r e2eClientRun
	r.e2eNodeRun = e2eRunNode(t, e2eClientTimeout, script, node, dir, env, &r.report, args...)
	return r
}

// e2eRunNode runs one of the Node clients (scripts/e2e) with env as its whole
// environment, for at most timeout, and decodes the one JSON object it prints on
// stdout into report; a stdout that is not one fails the test.
func e2eRunNode(t *testing.T, timeout time.Duration, script, node, dir string, env []string, report any, args ...string) e2eNodeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	r := e2eNodeRun{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(t0)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.exitCode = ee.ExitCode()
	default:
		t.Fatalf("running %s: %v\nstderr:\n%s", script, err, r.stderr)
	}
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), report); jerr != nil {
		t.Fatalf("%s %s: stdout is not one JSON object (%v; exit %d):\n%s\nstderr:\n%s",
			script, strings.Join(args, " "), jerr, r.exitCode, r.stdout, r.stderr)
	}
	return r
}

// e2eExpectPass asserts that client.mjs passed every check (e2eExpectChecks), and
// that the server it talked to is the binary e2eBuild made.
func e2eExpectPass(t *testing.T, r e2eClientRun) {
	t.Helper()
	e2eExpectChecks(t, r)
	if r.report.Server == nil || r.report.Server.Name != "mcp-exec" || r.report.Server.Version != e2eVersion {
		t.Errorf("server info in the handshake is %+v, want mcp-exec %s", r.report.Server, e2eVersion)
	}
}

// e2eExpectChecks reports client.mjs's result and asserts that it ran checks and
// passed every one.
func e2eExpectChecks(t *testing.T, r e2eClientRun) {
	t.Helper()
	var b strings.Builder
	for _, c := range r.report.Checks {
		status := "PASS"
		if !c.OK {
			status = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-18s %6d ms  %s\n", status, c.Name, c.MS, c.Detail)
	}
	t.Logf("client.mjs (%s %s, node) against %s: exit %d in %s, connect %d ms; %d passed, %d failed\n%s%s",
		r.report.SDK.Name, r.report.SDK.Version, r.report.Transport, r.exitCode, r.elapsed.Round(time.Millisecond),
		r.report.ConnectMS, len(r.report.Passed), len(r.report.Failed), b.String(), strings.TrimSpace(r.stdout))
	if r.exitCode != 0 || !r.report.OK || len(r.report.Passed) == 0 {
		t.Errorf("client.mjs: exit %d, ok %t, failed %v, error %q; its stderr:\n%s",
			r.exitCode, r.report.OK, r.report.Failed, r.report.Error, r.stderr)
	}
}

// defaultTools says whether names is the tool list of a server with the default
// configuration: exec, with the session tools where the backend has sessions
// (MCP_EXEC_MAX_SESSIONS defaults to 4; with the process backend there are none). Their behaviour is tested in mcpserver and by
// TestSession*; here the list only must not hold anything else.
func defaultTools(names []string) bool {
	names = slices.Sorted(slices.Values(names))
	return slices.Equal(names, []string{"exec"}) || slices.Equal(names, []string{"exec", "session_close", "session_create"})
}
