package main

// End-to-end test: the real mcp-exec binary, driven by an independent MCP client (the
// official TypeScript SDK, scripts/e2e/client.mjs) over stdio, streamable HTTP and SSE,
// with and without an auth token, against the real engine and sandbox image.
//
// Needs node and npm (for `npm ci` in scripts/e2e on first use), a running engine and
// the sandbox image (scripts/engine.sh, scripts/images.sh). Outside CI a missing piece
// skips the test; with CI set it fails. Skipped with -short.

import (
	"bufio"
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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

const (
	e2eAuthHeader    = "X-MCP-AUTH"
	e2eVersion       = "e2e-test"
	e2eStartTimeout  = 60 * time.Second // the binary's engine check, then listening
	e2eStopTimeout   = 45 * time.Second // after SIGTERM; the server allows 30s of grace
	e2eClientTimeout = 5 * time.Minute  // one run of client.mjs
	e2eNpmTimeout    = 5 * time.Minute  // npm ci
	e2eHTTPTimeout   = 10 * time.Second // the raw auth probes
	e2eInitializeReq = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e-go-probe","version":"1"}}}`
)

// e2eSkipOrFail skips outside CI and fails in CI, where a skipped test proves nothing.
func e2eSkipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "" {
		t.Skipf(format, args...)
	}
	t.Fatalf(format, args...)
}

func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	start := time.Now()
	dir, err := filepath.Abs(filepath.Join("..", "..", "scripts", "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		e2eSkipOrFail(t, "node not found (%v): install Node.js 20 or later to run the end-to-end test", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		e2eSkipOrFail(t, "npm not found (%v): install npm to run the end-to-end test", err)
	}
	e2eNpmCI(t, dir, npm)
	bin := e2eBuild(t)
	t.Logf("setup (npm, build) took %s", time.Since(start).Round(time.Millisecond))

	// The servers' whole environment: the engine (or cluster) and image selection, if
	// set, and what any process needs. Nothing else leaks in from the test's environment.
	// (scripts/k8s/ci.sh runs this test against the Kubernetes backend.)
	baseEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, k := range []string{"DOCKER_HOST", "MCP_EXEC_IMAGE", "MCP_EXEC_BACKEND", "MCP_EXEC_KUBECONFIG",
		"MCP_EXEC_KUBE_CONTEXT", "MCP_EXEC_KUBE_NAMESPACE", "MCP_EXEC_KUBE_IMAGE_PULL_POLICY", "MCP_EXEC_KUBE_SECCOMP_PROFILE"} {
		if v, ok := os.LookupEnv(k); ok {
			baseEnv = append(baseEnv, k+"="+v)
		}
	}
	// MCP_EXEC_TEST_RUNTIME (as for the launcher's tests) runs the servers' sandboxes
	// under that OCI runtime, e.g. runsc.
	if v := os.Getenv("MCP_EXEC_TEST_RUNTIME"); v != "" {
		baseEnv = append(baseEnv, "MCP_EXEC_RUNTIME="+v)
	}
	suffix := strconv.Itoa(os.Getpid())

	// The binary's start-up check (engine reachable, image present) decides whether
	// the engine is usable at all.
	pre, err := e2eStartServer(t, bin, baseEnv, "http", "e2e-preflight-"+suffix, "")
	var se *e2eStartError
	if errors.As(err, &se) && se.exitCode == 1 {
		e2eSkipOrFail(t, "engine unavailable: the binary failed its start-up check (run scripts/engine.sh and scripts/images.sh):\n%s", se.logs)
	}
	if err != nil {
		t.Fatalf("starting the preflight server: %v", err)
	}
	pre.stop(t)

	cases := []struct {
		name, transport string
		auth            bool
	}{
		{"stdio", "stdio", false},
		{"http", "http", false},
		{"http_auth", "http", true},
		{"sse", "sse", false},
		{"sse_auth", "sse", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			defer func() { t.Logf("%s took %s", tc.name, time.Since(t0).Round(time.Millisecond)) }()
			instance := "e2e-" + strings.ReplaceAll(tc.name, "_", "-") + "-" + suffix
			if tc.transport == "stdio" {
				// client.mjs spawns the server with its own environment.
				env := append(append([]string{}, baseEnv...), "MCP_EXEC_INSTANCE="+instance)
				t.Cleanup(func() { e2eAssertNoContainers(t, instance) })
				r := e2eRunClient(t, node, dir, env, "--transport", "stdio", "--cmd", bin)
				e2eExpectPass(t, r)
				return
			}
			var token string
			if tc.auth {
				token = e2eRandom()
			}
			srv, err := e2eStartServer(t, bin, baseEnv, tc.transport, instance, token)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"--transport", tc.transport, "--url", srv.endpoint}
			if tc.auth {
				args = append(args, "--token", token)
			}
			r := e2eRunClient(t, node, dir, baseEnv, args...)
			e2eExpectPass(t, r)
			if !tc.auth {
				return
			}

			e2eProbeAuth(t, srv, token)

			// The independent client with a wrong token must not get in.
			wrong := "wrong-" + e2eRandom()
			args = []string{"--transport", tc.transport, "--url", srv.endpoint, "--token", wrong}
			r = e2eRunClient(t, node, dir, baseEnv, args...)
			switch {
			case r.exitCode == 0 || r.report.OK:
				t.Errorf("client.mjs with a wrong token: exit %d, ok %t; want a failure; stderr:\n%s", r.exitCode, r.report.OK, r.stderr)
			case len(r.report.Passed) != 0:
				t.Errorf("client.mjs with a wrong token passed checks %v; stderr:\n%s", r.report.Passed, r.stderr)
			case !strings.Contains(r.report.Error, "401") && !strings.Contains(r.report.Error, "Unauthorized"):
				t.Errorf("client.mjs with a wrong token failed, but not with a 401: %q; stderr:\n%s", r.report.Error, r.stderr)
			default:
				t.Logf("wrong token refused as it should be: %s", r.report.Error)
			}
			if strings.Contains(r.stdout+r.stderr, token) {
				t.Errorf("client.mjs with a wrong token saw the real token in its output")
			}
		})
	}
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

// e2eBuild builds the binary once into a temporary directory.
func e2eBuild(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
		} else {
			t.Fatalf("go not found: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "mcp-exec")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
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

// e2eBuffer collects a process's output; the process writes from its own goroutine.
type e2eBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *e2eBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *e2eBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// e2eServer is a running mcp-exec serving http or sse.
type e2eServer struct {
	instance, token string
	base            string // http://127.0.0.1:PORT
	endpoint        string // base + /mcp or /sse
	cmd             *exec.Cmd
	logs            *e2eBuffer
	done            chan struct{} // closed when the process has exited; then waitErr is set
	waitErr         error
	ready           bool // it answered; only then can it have made containers
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

// e2eStartServer starts the binary on a free loopback port and waits until it answers.
// It is stopped, and its log shown if the test failed, in t.Cleanup.
func e2eStartServer(t *testing.T, bin string, baseEnv []string, transport, instance, token string) (*e2eServer, error) {
	t.Helper()
	port, err := e2eFreePort()
	if err != nil {
		return nil, err
	}
	s := &e2eServer{
		instance: instance,
		token:    token,
		base:     "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		logs:     &e2eBuffer{},
		done:     make(chan struct{}),
	}
	path := map[string]string{"http": "/mcp", "sse": "/sse"}[transport]
	s.endpoint = s.base + path
	env := append(append([]string{}, baseEnv...),
		"MCP_EXEC_TRANSPORT="+transport,
		"MCP_EXEC_ADDR="+net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
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
		if s.ready {
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
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
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

type e2eClientRun struct {
	exitCode       int
	stdout, stderr string
	report         e2eReport
	elapsed        time.Duration
}

// e2eRunClient runs client.mjs with env as its whole environment.
func e2eRunClient(t *testing.T, node, dir string, env []string, args ...string) e2eClientRun {
	t.Helper()
	return e2eRunScript(t, "client.mjs", node, dir, env, args...)
}

// e2eRunScript runs one of the Node clients (scripts/e2e) with env as its whole
// environment, and decodes the one JSON report it prints.
func e2eRunScript(t *testing.T, script, node, dir string, env []string, args ...string) e2eClientRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2eClientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	r := e2eClientRun{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(t0)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.exitCode = ee.ExitCode()
	default:
		t.Fatalf("running %s: %v\nstderr:\n%s", script, err, r.stderr)
	}
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r.report); jerr != nil {
		t.Errorf("%s %s: stdout is not one JSON object (%v):\n%s\nstderr:\n%s",
			script, strings.Join(args, " "), jerr, r.stdout, r.stderr)
	}
	return r
}

// e2eExpectPass asserts that client.mjs passed every check, and reports its result.
func e2eExpectPass(t *testing.T, r e2eClientRun) {
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
	if r.exitCode != 0 || !r.report.OK {
		t.Errorf("client.mjs: exit %d, ok %t, failed %v, error %q; its stderr:\n%s",
			r.exitCode, r.report.OK, r.report.Failed, r.report.Error, r.stderr)
	}
	if r.report.Server == nil || r.report.Server.Name != "mcp-exec" || r.report.Server.Version != e2eVersion {
		t.Errorf("server info in the handshake is %+v, want mcp-exec %s", r.report.Server, e2eVersion)
	}
}

// e2eProbeAuth sends requests by hand, without, with a wrong and with the right
// X-MCP-AUTH header, and checks that only the right one gets past the server's door,
// and that no answer echoes the token.
func e2eProbeAuth(t *testing.T, s *e2eServer, token string) {
	t.Helper()
	hc := &http.Client{Timeout: e2eHTTPTimeout}
	wrong := "wrong-" + e2eRandom()
	headerCases := []struct {
		name string
		set  func(http.Header)
	}{
		{"no header", func(http.Header) {}},
		{"wrong header", func(h http.Header) { h.Set(e2eAuthHeader, wrong) }},
		{"empty header", func(h http.Header) { h.Set(e2eAuthHeader, "") }},
		{"token with a suffix", func(h http.Header) { h.Set(e2eAuthHeader, token+"x") }},
		{"token prefix", func(h http.Header) { h.Set(e2eAuthHeader, token[:len(token)-1]) }},
		{"wrong bearer token", func(h http.Header) { h.Set("Authorization", "Bearer "+wrong) }},
		{"empty bearer token", func(h http.Header) { h.Set("Authorization", "Bearer ") }},
		{"token under the Basic scheme", func(h http.Header) { h.Set("Authorization", "Basic "+token) }},
		{"token and a disagreeing bearer", func(h http.Header) { h.Set(e2eAuthHeader, token); h.Set("Authorization", "Bearer "+wrong) }},
		{"bearer token and a disagreeing header", func(h http.Header) { h.Set(e2eAuthHeader, wrong); h.Set("Authorization", "Bearer "+token) }},
	}
	probes := 0
	defer func() { t.Logf("auth probes: %d raw requests sent", probes) }()
	// do sends one request and returns its status, checking the answer for the token.
	do := func(method, u, body string, set func(http.Header)) int {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, u, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		set(req.Header)
		resp, err := hc.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, u, err)
			return 0
		}
		defer resp.Body.Close()
		probes++
		// An event stream that got through would not end: leave it unread.
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			if strings.Contains(string(b), token) {
				t.Errorf("%s %s: the HTTP %d answer contains the token: %q", method, u, resp.StatusCode, b)
			}
		}
		for k, vs := range resp.Header {
			for _, v := range vs {
				if strings.Contains(v, token) {
					t.Errorf("%s %s: response header %s contains the token", method, u, k)
				}
			}
		}
		if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s: 401 with WWW-Authenticate %q, want a Bearer challenge", method, u, resp.Header.Get("WWW-Authenticate"))
		}
		return resp.StatusCode
	}
	expect401 := func(what, method, u, body string) {
		t.Helper()
		for _, h := range headerCases {
			if got := do(method, u, body, h.set); got != http.StatusUnauthorized {
				t.Errorf("%s with %s: %s %s got HTTP %d, want 401", what, h.name, method, u, got)
			}
		}
	}

	switch {
	case strings.HasSuffix(s.endpoint, "/mcp"):
		expect401("initialize", http.MethodPost, s.endpoint, e2eInitializeReq)
		expect401("opening the stream", http.MethodGet, s.endpoint, "")
		// Positive control: the right token gets through and opens a session, which
		// the same requests without the token must not be able to use.
		req, _ := http.NewRequest(http.MethodPost, s.endpoint, strings.NewReader(e2eInitializeReq))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(e2eAuthHeader, token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("initialize with the token: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize with the token: HTTP %d, session %q; want 200 and a session", resp.StatusCode, sid)
		}
		inSession := func(h http.Header) { h.Set("Mcp-Session-Id", sid); h.Set("Mcp-Protocol-Version", "2025-06-18") }
		for _, hcase := range headerCases {
			set := func(h http.Header) { inSession(h); hcase.set(h) }
			if got := do(http.MethodPost, s.endpoint, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, set); got != http.StatusUnauthorized {
				t.Errorf("tools/list in an open session with %s: got HTTP %d, want 401", hcase.name, got)
			}
			if got := do(http.MethodDelete, s.endpoint, "", set); got != http.StatusUnauthorized {
				t.Errorf("DELETE of an open session with %s: got HTTP %d, want 401", hcase.name, got)
			}
		}
		// The same token as a bearer token is the same credential.
		if got := do(http.MethodPost, s.endpoint, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
			func(h http.Header) { inSession(h); h.Set("Authorization", "Bearer "+token) }); got != http.StatusOK {
			t.Errorf("tools/list in the session with the token as Authorization: Bearer: HTTP %d, want 200", got)
		}
		if got := do(http.MethodDelete, s.endpoint, "", func(h http.Header) { inSession(h); h.Set(e2eAuthHeader, token) }); got/100 != 2 {
			t.Errorf("DELETE of the session with the token: HTTP %d, want 2xx", got)
		}

	case strings.HasSuffix(s.endpoint, "/sse"):
		expect401("opening the stream", http.MethodGet, s.endpoint, "")
		expect401("posting without a session", http.MethodPost, s.endpoint+"?sessionid=nosuchsession", e2eInitializeReq)
		// Positive control: the right token opens the stream and receives its POST
		// endpoint; POSTs there must still carry the token.
		ctx, cancel := context.WithTimeout(t.Context(), e2eHTTPTimeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set(e2eAuthHeader, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s with the token: %v", s.endpoint, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s with the token: HTTP %d, want 200", s.endpoint, resp.StatusCode)
		}
		endpoint, err := e2eReadEndpoint(resp.Body)
		if err != nil {
			t.Fatalf("reading the endpoint event: %v", err)
		}
		post, err := url.Parse(s.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		post, err = post.Parse(endpoint)
		if err != nil {
			t.Fatalf("endpoint %q: %v", endpoint, err)
		}
		expect401("posting in an open session", http.MethodPost, post.String(), e2eInitializeReq)
		if got := do(http.MethodPost, post.String(), e2eInitializeReq, func(h http.Header) { h.Set("Authorization", "Bearer "+token) }); got/100 != 2 {
			t.Errorf("POST %s with the token: HTTP %d, want 2xx", post, got)
		}
	}
}

// e2eReadEndpoint reads an SSE stream up to the data of its first "endpoint" event.
func e2eReadEndpoint(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:") && event == "endpoint":
			return strings.TrimSpace(strings.TrimPrefix(line, "data:")), nil
		case line == "":
			event = ""
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("the stream ended without an endpoint event")
}
