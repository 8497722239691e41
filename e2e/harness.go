package e2e

// The harness: the binary, a server of it, the Node clients, the engine checks.

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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

const (
	Version       = "e2e-test"
	StartTimeout  = 60 * time.Second // the binary's engine check, then listening
	StopTimeout   = 45 * time.Second // after SIGTERM; the server allows 30s of grace
	ClientTimeout = 5 * time.Minute  // one run of a Node client
	npmTimeout    = 5 * time.Minute  // npm ci

	AuthHeader    = "X-MCP-AUTH"
	HTTPTimeout   = 10 * time.Second // the raw auth probes
	InitializeReq = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e-go-probe","version":"1"}}}`
)

// Root is the module's root directory: the binary is built from it, and scripts/
// is found in it, whatever package's directory the test runs in.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// Main runs a package's tests (call it from TestMain), then removes the binary Build
// made and fails the run if any goroutine the tests started is still running. The
// exceptions are client-go's, for the life of the process: it keeps one transport per
// TLS configuration, and for a client certificate read from a file, a goroutine (with
// its work queue and poller) that watches the file for rotation
// (client-go/transport/cert_rotation.go); nothing can stop them. The Kubernetes tests
// close the idle connections of that transport themselves (KubeCluster).
func Main(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.Cleanup(func(code int) {
			if built.dir != "" {
				os.RemoveAll(built.dir)
			}
			os.Exit(code)
		}),
		goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).run"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).processNextWorkItem"),
		goleak.IgnoreTopFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
		// The rotation's poller (wait.PollImmediateUntil, started by dynamicClientCert.run):
		// nothing else in these packages polls with apimachinery's wait.
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntil"),
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntilWithContext.poller.func1.1"),
	)
}

// SkipOrFail skips outside CI and fails in CI, where a skipped test proves nothing.
func SkipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "" {
		t.Skipf(format, args...)
	}
	t.Fatalf(format, args...)
}

// Scripts returns scripts/e2e, the Node clients' directory, with their pinned
// packages installed (npmCI).
func Scripts(t *testing.T) string {
	t.Helper()
	SkipShort(t)
	dir := filepath.Join(Root(), "scripts", "e2e")
	npm, err := exec.LookPath("npm")
	if err != nil {
		SkipOrFail(t, "npm not found (%v): install npm to run the end-to-end tests", err)
	}
	npmCI(t, dir, npm)
	return dir
}

// Node returns scripts/e2e, ready (Scripts), and the node that runs its clients.
func Node(t *testing.T) (dir, node string) {
	t.Helper()
	dir = Scripts(t)
	node, err := exec.LookPath("node")
	if err != nil {
		SkipOrFail(t, "node not found (%v): install Node.js 20 or later to run the end-to-end tests", err)
	}
	return dir, node
}

// PassEnv returns KEY=value for each of keys set in the test's environment.
func PassEnv(keys ...string) []string {
	var env []string
	for _, k := range keys {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// BackendEnv is the backend selection of the test's environment, if set: the
// Kubernetes backend and its cluster (scripts/k8s/ci.sh runs the end-to-end tests that
// take it against the test cluster).
func BackendEnv() []string {
	return PassEnv("MCP_EXEC_BACKEND", "MCP_EXEC_KUBECONFIG", "MCP_EXEC_KUBE_CONTEXT",
		"MCP_EXEC_KUBE_NAMESPACE", "MCP_EXEC_KUBE_IMAGE_PULL_POLICY", "MCP_EXEC_KUBE_SECCOMP_PROFILE")
}

// Env is a server's whole environment: what any process needs, the engine and
// image selection if set, MCP_EXEC_TEST_RUNTIME (as for the launcher's tests) as the
// sandboxes' OCI runtime, e.g. runsc, then extra (a later KEY= wins). Nothing else
// leaks in from the test's environment.
func Env(extra ...string) []string {
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
		PassEnv("DOCKER_HOST", "MCP_EXEC_IMAGE")...)
	if v := os.Getenv("MCP_EXEC_TEST_RUNTIME"); v != "" {
		env = append(env, "MCP_EXEC_RUNTIME="+v)
	}
	return append(env, extra...)
}

// npmCI runs `npm ci` in dir unless node_modules already holds every pinned
// package (dependencies and optionalDependencies) at its pinned version.
func npmCI(t *testing.T, dir, npm string) {
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
	ctx, cancel := context.WithTimeout(t.Context(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir // npm gets the whole environment: it may need proxy and registry settings
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}

// SkipShort skips a test that builds and runs the binary when go test has -short.
func SkipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary: skipped with -short")
	}
}

// built is the binary Build made, once per test process; Main removes its directory.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Build builds the binary once per test process (skipped with -short) and returns its
// path. Tests share it, and must not change it: a test that needs its own copy makes one.
func Build(t *testing.T) string {
	t.Helper()
	SkipShort(t)
	built.once.Do(func() { built.dir, built.bin, built.err = build() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func build() (dir, bin string, err error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		root := os.Getenv("GOROOT")
		if root == "" {
			return "", "", fmt.Errorf("go not found: %w", err)
		}
		goTool = filepath.Join(root, "bin", "go")
	}
	dir, err = os.MkdirTemp("", "mcp-exec-e2e-")
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "mcp-exec")
	// The first build on a fresh machine compiles every dependency without -race (the
	// flavour go vet and the tests left in the cache is -race): 210-249 s measured in CI
	// on 2 cores, with the prefetch's builds beside it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-ldflags", "-X main.version="+Version, "-o", bin, "./cmd/mcp-exec")
	cmd.Dir = Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return dir, bin, nil
}

// Random is 32 random hex digits: tokens, and names no other run uses.
func Random() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Server is a running mcp-exec serving http or sse.
type Server struct {
	Instance, Token string
	Port            int
	Base            string // http://127.0.0.1:PORT
	Endpoint        string // Base + /mcp or /sse
	Cmd             *exec.Cmd
	Logs            *syncbuf.Buffer
	done            chan struct{} // closed when the process has exited; then waitErr is set
	waitErr         error
	ready           bool // it answered
	once            sync.Once
}

// HeaderTransport sends Token in AuthHeader with every request.
type HeaderTransport struct{ Token string }

func (h HeaderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(AuthHeader, h.Token)
	return http.DefaultTransport.RoundTrip(r)
}

// Connect connects the Go SDK's client (with opts and sopts, nil for the defaults) to
// s over streamable HTTP, with s's token when it has one; the session is closed when
// the test ends, before s is stopped.
func (s *Server) Connect(t *testing.T, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: s.Endpoint}
	if s.Token != "" {
		tr.HTTPClient = &http.Client{Transport: HeaderTransport{Token: s.Token}}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-exec-e2e", Version: Version}, opts).Connect(t.Context(), tr, sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Done is closed when the server's process has exited; then WaitErr says how.
func (s *Server) Done() <-chan struct{} { return s.done }

// WaitErr is the error of the process's exit (nil for a clean one), once Done is closed.
func (s *Server) WaitErr() error { return s.waitErr }

// StartError is a server that exited before it listened: its start-up check failed.
type StartError struct {
	ExitCode int
	Logs     string
}

func (e *StartError) Error() string {
	return fmt.Sprintf("the server exited with status %d before listening; its log:\n%s", e.ExitCode, e.Logs)
}

// Serve starts the binary serving transport on a free loopback port
// (StartServer). A failed start-up check (the engine or the image missing) skips
// the test outside CI and fails it in CI; any other failure fails it.
func Serve(t *testing.T, bin string, env []string, transport, instance, token string) *Server {
	t.Helper()
	return ServeOn(t, "127.0.0.1", bin, env, transport, instance, token)
}

// ServeOn is Serve listening on host (0.0.0.0: every interface).
func ServeOn(t *testing.T, host, bin string, env []string, transport, instance, token string) *Server {
	t.Helper()
	s, err := StartServerOn(t, host, bin, env, transport, instance, token)
	var se *StartError
	if errors.As(err, &se) && se.ExitCode == 1 {
		SkipOrFail(t, "engine unavailable: the binary failed its start-up check (run scripts/engine.sh and scripts/images.sh):\n%s", se.Logs)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// StartServer starts the binary on a free loopback port and waits until it answers.
// It is stopped, and its log shown if the test failed, in t.Cleanup.
func StartServer(t *testing.T, bin string, baseEnv []string, transport, instance, token string) (*Server, error) {
	t.Helper()
	return StartServerOn(t, "127.0.0.1", bin, baseEnv, transport, instance, token)
}

// StartServerOn is StartServer listening on host; it is checked at 127.0.0.1.
func StartServerOn(t *testing.T, host, bin string, baseEnv []string, transport, instance, token string) (*Server, error) {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Instance: instance,
		Token:    token,
		Port:     port,
		Base:     "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Logs:     &syncbuf.Buffer{},
		done:     make(chan struct{}),
	}
	path := map[string]string{"http": "/mcp", "sse": "/sse"}[transport]
	s.Endpoint = s.Base + path
	env := append(append([]string{}, baseEnv...),
		"MCP_EXEC_TRANSPORT="+transport,
		"MCP_EXEC_ADDR="+net.JoinHostPort(host, strconv.Itoa(port)),
		"MCP_EXEC_INSTANCE="+instance,
	)
	if token != "" {
		env = append(env, "MCP_EXEC_AUTH_TOKEN="+token)
	}
	s.Cmd = exec.Command(bin)
	s.Cmd.Env = env
	s.Cmd.Stdout = s.Logs
	s.Cmd.Stderr = s.Logs
	if err := s.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.waitErr = s.Cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.Stop(t) })

	deadline := time.Now().Add(StartTimeout)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-s.done:
			return nil, &StartError{ExitCode: s.Cmd.ProcessState.ExitCode(), Logs: s.Logs.String()}
		default:
		}
		if resp, err := hc.Get(s.Base + "/healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.ready = true
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s server not listening on %s after %s; its log:\n%s", transport, s.Base, StartTimeout, s.Logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM, waits for a clean exit, checks that no sandbox and no token
// were left behind, and shows the log if the test failed. It runs once.
func (s *Server) Stop(t *testing.T) {
	t.Helper()
	s.once.Do(func() {
		select {
		case <-s.done:
		default:
			s.Cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.done:
				if s.waitErr != nil {
					t.Errorf("server %s after SIGTERM: %v, want a clean exit", s.Instance, s.waitErr)
				}
			case <-time.After(StopTimeout):
				t.Errorf("server %s still running %s after SIGTERM; killing it", s.Instance, StopTimeout)
				s.Cmd.Process.Kill()
				<-s.done
			}
		}
		logs := s.Logs.String()
		if s.Token != "" && strings.Contains(logs, s.Token) {
			t.Errorf("server %s logged its auth token", s.Instance)
		}
		// A server makes containers before it answers (the limits check's sandbox,
		// the warm pool): one that was slow to answer (a loaded machine) and was
		// stopped then is checked too, unless there is no engine (then it made none).
		if s.ready || EngineAnswers() {
			AssertNoContainers(t, s.Instance)
		}
		if t.Failed() {
			t.Logf("log of server %s:\n%s", s.Instance, logs)
		}
	})
}

// FreePort is a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// EngineAnswers reports whether the engine answers a ping.
func EngineAnswers() bool {
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

// AssertNoContainers checks that the engine holds no container of instance.
func AssertNoContainers(t *testing.T, instance string) {
	t.Helper()
	n, err := Containers(instance)
	if err != nil {
		t.Error(err)
		return
	}
	if n != 0 {
		t.Errorf("%d containers of instance %s left behind, want 0", n, instance)
	}
}

// Containers counts the engine's containers of instance, running or not.
func Containers(instance string) (int, error) {
	cli, err := engine.NewClient("")
	if err != nil {
		return 0, fmt.Errorf("engine client: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := make(client.Filters).Add("label", launcher.LabelInstance+"="+instance)
	list, err := docker.RetryProcRace(ctx, func() (client.ContainerListResult, error) {
		return cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	})
	if err != nil {
		return 0, fmt.Errorf("listing containers: %w", err)
	}
	return len(list.Items), nil
}

// Report is what client.mjs prints on stdout.
type Report struct {
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

// NodeRun is how a run of a Node client ended.
type NodeRun struct {
	ExitCode       int
	Stdout, Stderr string
	Elapsed        time.Duration
}

// ClientRun is a run of client.mjs (or rich.mjs) and its report.
type ClientRun struct {
	NodeRun
	Report Report
}

// RunClient runs client.mjs with env as its whole environment.
func RunClient(t *testing.T, node, dir string, env []string, args ...string) ClientRun {
	t.Helper()
	return RunScript(t, "client.mjs", node, dir, env, args...)
}

// RunScript runs a Node client that reports like client.mjs (RunNode).
func RunScript(t *testing.T, script, node, dir string, env []string, args ...string) ClientRun {
	t.Helper()
	var r ClientRun
	r.NodeRun = RunNode(t, ClientTimeout, script, node, dir, env, &r.Report, args...)
	return r
}

// RunNode runs one of the Node clients (scripts/e2e) with env as its whole
// environment, for at most timeout, and decodes the one JSON object it prints on
// stdout into report; a stdout that is not one fails the test.
func RunNode(t *testing.T, timeout time.Duration, script, node, dir string, env []string, report any, args ...string) NodeRun {
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
	r := NodeRun{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(t0)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.ExitCode = ee.ExitCode()
	default:
		t.Fatalf("running %s: %v\nstderr:\n%s", script, err, r.Stderr)
	}
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), report); jerr != nil {
		t.Fatalf("%s %s: stdout is not one JSON object (%v; exit %d):\n%s\nstderr:\n%s",
			script, strings.Join(args, " "), jerr, r.ExitCode, r.Stdout, r.Stderr)
	}
	return r
}

// ExpectPass asserts that client.mjs passed every check (ExpectChecks), and
// that the server it talked to is the binary Build made.
func ExpectPass(t *testing.T, r ClientRun) {
	t.Helper()
	ExpectChecks(t, r)
	if r.Report.Server == nil || r.Report.Server.Name != "mcp-exec" || r.Report.Server.Version != Version {
		t.Errorf("server info in the handshake is %+v, want mcp-exec %s", r.Report.Server, Version)
	}
}

// ExpectChecks reports client.mjs's result and asserts that it ran checks and
// passed every one.
func ExpectChecks(t *testing.T, r ClientRun) {
	t.Helper()
	var b strings.Builder
	for _, c := range r.Report.Checks {
		status := "PASS"
		if !c.OK {
			status = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-18s %6d ms  %s\n", status, c.Name, c.MS, c.Detail)
	}
	t.Logf("client.mjs (%s %s, node) against %s: exit %d in %s, connect %d ms; %d passed, %d failed\n%s%s",
		r.Report.SDK.Name, r.Report.SDK.Version, r.Report.Transport, r.ExitCode, r.Elapsed.Round(time.Millisecond),
		r.Report.ConnectMS, len(r.Report.Passed), len(r.Report.Failed), b.String(), strings.TrimSpace(r.Stdout))
	if r.ExitCode != 0 || !r.Report.OK || len(r.Report.Passed) == 0 {
		t.Errorf("client.mjs: exit %d, ok %t, failed %v, error %q; its stderr:\n%s",
			r.ExitCode, r.Report.OK, r.Report.Failed, r.Report.Error, r.Stderr)
	}
}

// DefaultTools says whether names is the tool list of a server with the default
// configuration: exec, with the run tools where the backend has background runs
// (docker and process) and the session tools where it has sessions
// (MCP_EXEC_MAX_SESSIONS defaults to 4; with the process backend there are none). Their behaviour is tested in mcpserver and by
// TestSession* and TestBackground*; here the list only must not hold anything else.
func DefaultTools(names []string) bool {
	names = slices.Sorted(slices.Values(names))
	for _, want := range [][]string{
		{"exec"}, {"exec", "session_close", "session_create"},
		{"exec", "run_cancel", "run_wait"}, {"exec", "run_cancel", "run_wait", "session_close", "session_create"},
	} {
		if slices.Equal(names, want) {
			return true
		}
	}
	return false
}

// ExitCode is a finished command's exit code from its Run error: 0 for none, the code
// of an *exec.ExitError, -1 for any other error (the command did not run to an exit).
func ExitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		return -1
	}
}

// KubeCluster returns the test cluster's kubeconfig and its REST config, or skips
// the test when MCP_EXEC_TEST_KUBECONFIG names none (scripts/k8s/ci.sh sets it). client-go
// shares one transport per TLS configuration across the process; its idle connections
// (and their read loops) end in t.Cleanup, so that goleak sees none of them.
func KubeCluster(t *testing.T) (string, *rest.Config) {
	t.Helper()
	kc := os.Getenv("MCP_EXEC_TEST_KUBECONFIG")
	if kc == "" {
		t.Skip("MCP_EXEC_TEST_KUBECONFIG is not set: no test cluster (scripts/k8s/up.sh)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if tr, err := rest.TransportFor(rc); err == nil {
			utilnet.CloseIdleConnectionsFor(tr)
		}
	})
	return kc, rc
}
