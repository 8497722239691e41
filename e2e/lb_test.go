package e2e_test

// Load-balancer test: two stateless replicas of the real binary (MCP_EXEC_STATELESS,
// same token, their own ports and instances) behind nginx doing plain round-robin, no
// affinity, and an independent client (scripts/e2e/lb.mjs, the TypeScript SDK) making
// 50 exec calls through it. Every result must be right and both replicas must have run
// execs: counted from the X-Upstream header nginx adds and, independently, from each
// replica's "exec" log lines.
//
// Needs node, npm and nginx besides the engine and the sandbox image. In CI, as root,
// a missing nginx is installed from Debian's packages (nginx-light, else nginx);
// elsewhere a missing piece skips the test. Skipped with -short.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

const (
	lbCalls        = 50
	lbConcurrency  = 4
	lbInstallLimit = 5 * time.Minute
)

func TestLoadBalancedStateless(t *testing.T) {
	start := time.Now()
	dir, node := e2e.Node(t)
	bin := e2e.Build(t)
	nginx := lbFindNginx(t)
	t.Logf("setup (nginx, npm, build) took %s", time.Since(start).Round(time.Millisecond))

	baseEnv := e2e.Env("MCP_EXEC_STATELESS=true", "MCP_EXEC_LOG_FORMAT=json", "MCP_EXEC_LOG_LEVEL=info")
	token := e2e.Random()
	suffix := strconv.Itoa(os.Getpid())
	var replicas []*e2e.Server
	for i := range 2 {
		replicas = append(replicas, e2e.Serve(t, bin, baseEnv, "http", fmt.Sprintf("lb-%d-%s", i, suffix), token))
	}

	lb := lbStartNginx(t, nginx, replicas)
	t.Logf("nginx on %s in front of %s and %s", lb, replicas[0].Base, replicas[1].Base)

	// The balancer passes X-MCP-AUTH through untouched: wrong or missing tokens are
	// refused by the replicas, the right one is let in without any session.
	hc := &http.Client{Timeout: e2e.HTTPTimeout}
	post := func(tok string) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, lb+"/mcp", strings.NewReader(e2e.InitializeReq))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set(e2e.AuthHeader, tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("POST %s/mcp: %v", lb, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	for _, tok := range []string{"", "wrong-" + token} {
		if code, _ := post(tok); code != http.StatusUnauthorized {
			t.Errorf("initialize through nginx with token %q: HTTP %d, want 401", tok, code)
		}
	}
	for range 2 { // one per replica, round-robin
		code, h := post(token)
		if code != http.StatusOK {
			t.Errorf("initialize through nginx with the token: HTTP %d, want 200", code)
		}
		if sid := h.Get("Mcp-Session-Id"); sid != "" {
			t.Errorf("stateless replica %s answered initialize with session %q, want none", h.Get("X-Upstream"), sid)
		}
	}

	// The client: 50 calls, each print(i*i), through nginx.
	var rep struct {
		OK         bool                      `json:"ok"`
		Correct    int                       `json:"correct"`
		Failures   []json.RawMessage         `json:"failures"`
		Upstreams  map[string]map[string]int `json:"upstreams"`
		Statuses   map[string]int            `json:"statuses"`
		SessionID  *string                   `json:"session_id"`
		Error      string                    `json:"error"`
		DurationMS int64                     `json:"duration_ms"`
	}
	r := e2e.RunNode(t, e2e.ClientTimeout, "lb.mjs", node, dir, baseEnv, &rep, "--url", lb+"/mcp", "--token", token,
		"--calls", strconv.Itoa(lbCalls), "--concurrency", strconv.Itoa(lbConcurrency))
	t.Logf("lb.mjs: %d of %d calls right in %s (concurrency %d); upstreams %v; statuses %v",
		rep.Correct, lbCalls, r.Elapsed.Round(time.Millisecond), lbConcurrency, rep.Upstreams, rep.Statuses)
	if r.ExitCode != 0 || !rep.OK || rep.Correct != lbCalls {
		t.Errorf("lb.mjs: exit %d, ok %t, %d of %d right, error %q, failures %s\nstderr:\n%s",
			r.ExitCode, rep.OK, rep.Correct, lbCalls, rep.Error, rep.Failures, r.Stderr)
	}
	if rep.SessionID != nil && *rep.SessionID != "" {
		t.Errorf("the client got session %q from stateless replicas, want none", *rep.SessionID)
	}

	// Both replicas served calls, by nginx's account and by their own logs, and the
	// two accounts agree.
	totalLogged := 0
	for _, s := range replicas {
		addr := strings.TrimPrefix(s.Base, "http://")
		byHeader := rep.Upstreams[addr]["tools/call"]
		logged := lbCountExecLogs(t, s)
		totalLogged += logged
		t.Logf("replica %s (%s): %d tools/call by X-Upstream, %d exec log lines; all requests: %v",
			s.Instance, addr, byHeader, logged, rep.Upstreams[addr])
		if byHeader < lbCalls/5 {
			t.Errorf("replica %s answered %d of %d tools/call requests, want at least %d under round-robin", addr, byHeader, lbCalls, lbCalls/5)
		}
		if logged != byHeader {
			t.Errorf("replica %s logged %d execs but nginx routed %d tools/call requests to it", addr, logged, byHeader)
		}
	}
	if totalLogged != lbCalls {
		t.Errorf("the replicas logged %d execs together, want %d", totalLogged, lbCalls)
	}
	if n := rep.Upstreams["(none)"]; len(n) != 0 {
		t.Errorf("responses without the X-Upstream header: %v", n)
	}
}

// lbFindNginx returns the nginx binary, installing it from Debian's packages in CI
// (as root) when it is missing.
func lbFindNginx(t *testing.T) string {
	t.Helper()
	find := func() string {
		if p, err := exec.LookPath("nginx"); err == nil {
			return p
		}
		if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
			return "/usr/sbin/nginx"
		}
		return ""
	}
	if p := find(); p != "" {
		return p
	}
	if os.Getenv("CI") == "" || os.Getuid() != 0 {
		t.Skip("nginx not found: install it (apt-get install nginx-light) to run the load-balancer test")
	}
	ctx, cancel := context.WithTimeout(t.Context(), lbInstallLimit)
	defer cancel()
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	t.Log("installing nginx from Debian's packages")
	err := apt("update", "-qq")
	if err == nil {
		if err = apt("install", "-y", "-qq", "nginx-light"); err != nil {
			err = apt("install", "-y", "-qq", "nginx")
		}
	}
	if p := find(); p != "" {
		return p
	}
	t.Fatalf("installing nginx: %v", err)
	return ""
}

// lbStartNginx runs nginx in the foreground with a temporary configuration: a
// round-robin upstream of the replicas, no affinity, no buffering, HTTP/1.1 with
// keep-alive to the replicas, and the answering replica in an X-Upstream header.
// It returns nginx's base URL and stops nginx in t.Cleanup.
func lbStartNginx(t *testing.T, nginx string, replicas []*e2e.Server) string {
	t.Helper()
	dir := t.TempDir()
	port, err := e2e.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var upstream strings.Builder
	for _, s := range replicas {
		fmt.Fprintf(&upstream, "        server %s;\n", strings.TrimPrefix(s.Base, "http://"))
	}
	// X-MCP-AUTH, Mcp-Session-Id and Mcp-Protocol-Version pass through as every
	// request header does. Host is set to localhost: a replica reached on a loopback
	// address refuses (403, the SDK's DNS-rebinding protection) any request whose Host
	// is not a loopback name, and nginx would otherwise send the upstream's name.
	// The workers need no file: the access log is opened by the master and bodies
	// stay in memory (no buffering, bodies up to the buffer size).
	conf := fmt.Sprintf(`worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    upstream mcp_exec {
%[2]s        keepalive 8;
    }
    server {
        listen 127.0.0.1:%[3]d;
        client_max_body_size 16m;
        client_body_buffer_size 1m;
        location / {
            proxy_pass http://mcp_exec;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host localhost;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 300s;
            add_header X-Upstream $upstream_addr always;
        }
    }
}
`, dir, upstream.String(), port)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	cmd := exec.Command(nginx, "-p", dir, "-e", "stderr", "-c", confPath, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT) // graceful: lets the workers finish
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("nginx log:\n%s", logs.String())
		}
	})
	base := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("nginx exited before listening; its log:\n%s", logs.String())
		default:
		}
		if resp, err := hc.Get(base + "/healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx not answering on %s; its log:\n%s", base, logs.String())
		}
	}
}

// lbCountExecLogs counts the replica's "exec" log lines: one per finished exec.
func lbCountExecLogs(t *testing.T, s *e2e.Server) int {
	t.Helper()
	n := 0
	sc := bufio.NewScanner(strings.NewReader(s.Logs.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "exec" {
			n++
		}
	}
	return n
}
