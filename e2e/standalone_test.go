package e2e_test

// Standalone mode (--backend process) against the real image, started by the shared
// engine exactly as docs/standalone.md says. Each test's containers carry names of their own
// and are removed after it. These tests need the image: `bash scripts/images.sh
// --standalone` (CI=true makes a missing image or engine a failure).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// saLocked is docs/standalone.md's docker run line (exactly), without the image.
var saLocked = []string{
	"--network", "none", "--read-only", "--cap-drop", "ALL",
	"--security-opt", "no-new-privileges", "--user", "65532:65532",
	"--tmpfs", "/tmp:rw,noexec,nosuid,size=64m",
	"--memory", "256m", "--pids-limit", "128", "--cpus", "1",
}

var saSeq atomic.Int64

// processDifferences are the process backend's documented differences, which its
// selftest reports as diff lines: the keys of knownDifferences["process"]
// (cmd/mcp-exec/selftest.go).
var processDifferences = []string{"network_tcp_outside_unreachable", "network_udp_outside_unreachable",
	"environment_isolated", "tmp_not_persisted", "daemon_not_persisted"}

// quietAfter is the server's (cmd/mcp-exec/standalone.go): a SIGTERM that soon after a
// run's end may be that run's, and is not obeyed.
const quietAfter = 2 * time.Second

func saImage(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("standalone image test: skipped with -short")
	}
	img := os.Getenv("MCP_EXEC_STANDALONE_IMAGE")
	if img == "" {
		img = "mcp-exec/standalone:latest"
	}
	if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
		e2e.SkipOrFail(t, "standalone image %s not available (%v): bash scripts/images.sh --standalone", img, err)
	}
	return img
}

// saName is a container name of this test's own, removed (if it still exists) at
// the end of the test.
func saName(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("mcpx-standalone-%d-%d", os.Getpid(), saSeq.Add(1))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	return name
}

// saRun starts the image with flags and env (NAME=value each) over stdio with no input
// (a server that starts sees the end of its input and exits), within 60 s, and returns
// its exit code (-1 if it did not run to an exit: err says why) and stderr.
func saRun(t *testing.T, img string, flags, env []string) (code int, stderr string, err error) {
	t.Helper()
	args := append([]string{"run", "--rm", "-i", "--name", saName(t)}, flags...)
	for _, e := range env {
		args = append(args, "-e", e)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append(args, img)...)
	cmd.Stdin = strings.NewReader("")
	var buf bytes.Buffer
	cmd.Stderr = &buf
	err = cmd.Run()
	return e2e.ExitCode(err), buf.String(), err
}

// without returns flags with one flag (and its value, if it has one) removed.
func without(flags []string, flag string, hasValue bool) []string {
	var out []string
	for i := 0; i < len(flags); i++ {
		if flags[i] == flag {
			if hasValue {
				i++
			}
			continue
		}
		out = append(out, flags[i])
	}
	return out
}

func replaced(flags []string, flag, value string) []string {
	out := append([]string(nil), flags...)
	for i := range out {
		if out[i] == flag {
			out[i+1] = value
		}
	}
	return out
}

// TestStandaloneRefusesWithoutEachLock starts the image with one lock missing at a
// time: each start must fail, with a message naming that lock, before any program
// could run.
func TestStandaloneRefusesWithoutEachLock(t *testing.T) {
	img := saImage(t)
	for _, tc := range []struct {
		name  string
		flags []string
		env   []string
		want  string
	}{
		{"read-only", without(saLocked, "--read-only", false), nil, `"read-only root filesystem" missing: / is mounted read-write; docker run --read-only`},
		{"cap-drop", without(saLocked, "--cap-drop", true), nil, `"no capabilities" missing: CapBnd is`},
		{"no-new-privileges", without(saLocked, "--security-opt", true), nil, `"no-new-privileges" missing: NoNewPrivs is "0", want 1`},
		{"root", replaced(saLocked, "--user", "0:0"), nil, `"not root" missing: running as uid 0`},
		{"tmpfs", without(saLocked, "--tmpfs", true), nil, `"/tmp a size-limited tmpfs" missing: /tmp is not a tmpfs`},
		{"tmpfs unsized", replaced(saLocked, "--tmpfs", "/tmp:rw,noexec,nosuid"), nil, `"/tmp a size-limited tmpfs" missing: /tmp is a tmpfs of`},
		{"network", replaced(saLocked, "--network", "bridge"), nil, `"network namespace holds only loopback" missing: interfaces eth0 besides loopback`},
		{"http without the egress statement", replaced(saLocked, "--network", "bridge"), []string{"MCP_EXEC_TRANSPORT=http", "MCP_EXEC_AUTH_TOKEN_SHA256=" + tokenSHA256(e2e.Random())}, `"egress denied" missing: serving HTTP/SSE needs a network`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr, err := saRun(t, img, tc.flags, tc.env)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("got exit %d (%v), stderr:\n%s\nwant exit 1 and %q", code, err, stderr, tc.want)
			}
			// The plain message (after the JSON log line): one line per missing lock.
			n := 0
			for _, l := range strings.Split(stderr, "\n") {
				if strings.HasPrefix(l, "standalone lock ") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("got %d missing locks reported, want exactly 1:\n%s", n, stderr)
			}
			if strings.Contains(stderr, "backend ready") {
				t.Errorf("the server got ready although a lock is missing:\n%s", stderr)
			}
		})
	}
}

// TestStandaloneEgressProbe serves HTTP on an internal network (no route out), with
// the egress statement: the start-up check passes while the server is alone on it;
// then with a TCP listener on the same network, it refuses, naming the listener,
// whether the listener is in the probe list or only the container's neighbour; and
// with a DNS responder on the network (a UDP probe pointed at it), it refuses naming
// it. No traffic leaves the bridge.
func TestStandaloneEgressProbe(t *testing.T) {
	img := saImage(t)
	net := fmt.Sprintf("mcpx-standalone-net-%d", os.Getpid())
	subnet := "10.213.77.0/24"
	if out, err := exec.Command("docker", "network", "create", "--internal", "--subnet", subnet, net).CombinedOutput(); err != nil {
		t.Fatalf("creating network: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", net).Run() })
	flags := replaced(saLocked, "--network", net)
	run := func(t *testing.T, probes string, wantReady bool, want string) {
		name := saName(t)
		args := append([]string{"run", "--rm", "--name", name}, flags...)
		args = append(args, "-e", "MCP_EXEC_TRANSPORT=http", "-e", "MCP_EXEC_STANDALONE_EGRESS_DENIED=true",
			"-e", "MCP_EXEC_AUTH_TOKEN_SHA256="+tokenSHA256(e2e.Random()), "-e", "MCP_EXEC_STANDALONE_EGRESS_PROBES="+probes, img)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "docker", args...)
		var stderr syncbuf.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		deadline := time.After(45 * time.Second)
		for {
			if wantReady && strings.Contains(stderr.String(), "process backend ready") {
				break
			}
			select {
			case err := <-done:
				if wantReady {
					t.Fatalf("server ended (%v) before it was ready:\n%s", err, stderr.String())
				}
				if !strings.Contains(stderr.String(), want) {
					t.Fatalf("got stderr:\n%s\nwant %q", stderr.String(), want)
				}
				return
			case <-deadline:
				t.Fatalf("neither ready nor refused after 45 s:\n%s", stderr.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), `"level":"warn"`) {
			t.Errorf("ready, but the start-up log lacks a loud %q:\n%s", want, stderr.String())
		}
		_ = exec.Command("docker", "stop", "-t", "5", name).Run()
		<-done
	}
	// Alone on the network: the defaults (public resolvers over IPv4, IPv6 and UDP,
	// private ranges), Docker's resolver 127.0.0.11 (TCP and UDP), the bridge's
	// address and the sweep of the subnet all fail.
	t.Run("denied", func(t *testing.T) {
		run(t, "", true, `"egress_probes_unreachable":["1.1.1.1:443"`)
	})
	listener := saName(t)
	if out, err := exec.Command("docker", "run", "-d", "--name", listener, "--network", net, "--ip", "10.213.77.20",
		"--user", "65532:65532", "--entrypoint", "python3", img, "-m", "http.server", "-d", "/", "8000").CombinedOutput(); err != nil {
		t.Fatalf("starting the listener: %v: %s", err, out)
	}
	// A DNS responder: answers every query NOERROR, as a resolver that forwards does.
	dns := saName(t)
	if out, err := exec.Command("docker", "run", "-d", "--name", dns, "--network", net, "--ip", "10.213.77.21",
		"--user", "65532:65532", "--entrypoint", "python3", img, "-c", `
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 5353))
while True:
    q, a = s.recvfrom(512)
    s.sendto(q[:2] + bytes([0x81, 0x80]) + q[4:], a)
`).CombinedOutput(); err != nil {
		t.Fatalf("starting the DNS responder: %v: %s", err, out)
	}
	for _, tc := range []struct{ name, probes, want string }{
		{"open", "192.0.2.1:9,10.213.77.20:8000", `"egress denied" missing: MCP_EXEC_STANDALONE_EGRESS_DENIED=true, but a child connected to 10.213.77.20:8000`},
		{"neighbour not in the list", "192.0.2.1:9", `"egress denied" missing: MCP_EXEC_STANDALONE_EGRESS_DENIED=true, but a child reached the neighbours 10.213.77.20:8000`},
		{"dns over udp", "udp:10.213.77.21:5353", `a DNS query over UDP was answered by 10.213.77.21:5353`},
	} {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.probes, false, tc.want) })
	}
}

// saSession starts the locked image over stdio and connects an MCP client to it.
func saSession(t *testing.T, img string, extra ...string) *mcp.ClientSession {
	t.Helper()
	return saSessionNamed(t, img, saName(t), extra...)
}

// saSessionNamed is saSession with the container's name given (from saName), for
// tests that also docker exec into it.
func saSessionNamed(t *testing.T, img, name string, extra ...string) *mcp.ClientSession {
	t.Helper()
	args := append([]string{"run", "--rm", "-i", "--name", name}, saLocked...)
	args = append(append(args, extra...), img)
	cmd := exec.Command("docker", args...)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "standalone-test", Version: "0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type saResult struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	TimedOut  bool   `json:"timed_out"`
	OOMKilled bool   `json:"oom_killed"`
}

func saExec(t *testing.T, s *mcp.ClientSession, code string, timeout int) saResult {
	t.Helper()
	args := map[string]any{"code": code}
	if timeout > 0 {
		args["timeout_s"] = timeout
	}
	// Bounded: a server the program managed to stop (a traced or frozen PID 1) must
	// fail the test, not hang it.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: args})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	var out saResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || res.IsError {
		t.Fatalf("exec: isError %v, %s (%v): %s", res.IsError, b, err, toolText(res))
	}
	return out
}

func saLine(t *testing.T, r saResult, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(r.Stdout, "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return v
		}
	}
	t.Fatalf("no %q line in stdout %q, stderr %q", prefix, r.Stdout, r.Stderr)
	return ""
}

// TestStandaloneNothingLeftBehind: a run that times out after leaving a setsid'd,
// double-forked process, files in its directory, /tmp, /tmp/outputs, /dev/shm and a SysV shared
// memory segment; the next run finds none of it, and no process but the server, its
// own bootstrap and itself.
func TestStandaloneNothingLeftBehind(t *testing.T) {
	s := saSession(t, saImage(t))
	first := saExec(t, s, `
import ctypes, os, sys, time
open("mine.txt", "w").write("x")
open("/tmp/stray.txt", "w").write("x")
open("/dev/shm/stray", "w").write("x")
open("/tmp/outputs/stray.txt", "w").write("x")
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget(0x4d435058, 4096, 0o1600)  # IPC_CREAT | 0600
print("shm", shm, flush=True)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, b"%d\n" % os.getpid())
        time.sleep(600)
    os._exit(0)
os.wait()
print("cwd", os.getcwd(), flush=True)
print("daemon", os.read(r, 32).decode().strip(), flush=True)
time.sleep(600)
`, 3)
	if !first.TimedOut {
		t.Fatalf("first run: got %+v, want timed_out", first)
	}
	if shm := saLine(t, first, "shm "); strings.HasPrefix(shm, "-") {
		t.Fatalf("first run could not make a SysV segment (%s): the test would prove nothing", shm)
	}
	cwd, daemon := saLine(t, first, "cwd "), saLine(t, first, "daemon ")
	second := saExec(t, s, fmt.Sprintf(`
import os
print("daemon_alive", os.path.exists("/proc/%s"))
print("old_dir", os.path.exists(%q))
print("tmp", sorted(os.listdir("/tmp")), os.path.basename(os.getcwd()))
print("shm_files", sorted(os.listdir("/dev/shm")))
print("outputs", sorted(os.listdir("/tmp/outputs")))
print("sysv", [l.split()[1] for l in open("/proc/sysvipc/shm").readlines()[1:]])
print("procs", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), os.getpid(), os.getppid())
`, daemon, cwd), 0)
	for _, c := range []struct{ prefix, want string }{
		{"daemon_alive ", "False"},
		{"old_dir ", "False"},
		{"shm_files ", "[]"},
		{"outputs ", "[]"},
		{"sysv ", "[]"},
	} {
		if got := saLine(t, second, c.prefix); got != c.want {
			t.Errorf("%sgot %s, want %s", c.prefix, got, c.want)
		}
	}
	tmp := saLine(t, second, "tmp ")
	// Its own directory, and the output directory its bootstrap made (empty, above).
	if m := regexp.MustCompile(`^\['outputs', '(run-\d+)'\] (run-\d+)$`).FindStringSubmatch(tmp); m == nil || m[1] != m[2] {
		t.Errorf("/tmp of the second run: got %s, want only its own directory and outputs", tmp)
	}
	f := strings.Fields(strings.NewReplacer("[", "", "]", "", ",", "").Replace(saLine(t, second, "procs ")))
	if len(f) != 5 || f[0] != "1" {
		t.Errorf("processes seen by the second run: got %v, want only 1 (the server), its bootstrap and itself", f)
	}
}

// TestStandaloneServerProtected: the program cannot read the server's environment
// (which holds the token), memory or descriptors, cannot trace it or its own
// bootstrap, and cannot signal it: SIGKILL, SIGSTOP and SIGTERM to PID 1 are refused
// (EPERM, the run's signal guard). The next run works.
func TestStandaloneServerProtected(t *testing.T) {
	token := e2e.Random()
	s := saSession(t, saImage(t), "-e", "MCP_EXEC_AUTH_TOKEN_SHA256="+tokenSHA256(token))
	r := saExec(t, s, `
import ctypes, glob, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, f):
    try:
        v = f()
        print(name, "ALLOWED", repr(v)[:80])
    except OSError as e:
        print(name, "denied", e.errno)
attempt("environ", lambda: open("/proc/1/environ", "rb").read())
attempt("mem", lambda: open("/proc/1/mem", "rb").read(1))
attempt("fd", lambda: os.listdir("/proc/1/fd"))
attempt("maps", lambda: open("/proc/1/maps").read())
attempt("task_environ", lambda: [open(p, "rb").read() for p in glob.glob("/proc/1/task/*/environ")])
attempt("boot_environ", lambda: open("/proc/%d/environ" % os.getppid(), "rb").read())
def ptrace(pid):
    if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
    return "attached"
attempt("ptrace_server", lambda: ptrace(1))
attempt("ptrace_boot", lambda: ptrace(os.getppid()))
blob = b"".join(open(p, "rb").read() for p in glob.glob("/proc/[0-9]*/cmdline"))
print("own_env", sorted(os.environ))
print("cmdline_has_token", b"TOKEN" in blob)
for sig in (signal.SIGKILL, signal.SIGSTOP):
    attempt("kill_" + sig.name, lambda: os.kill(1, sig))
print("signals sent", flush=True)
`, 0)
	if strings.Contains(r.Stdout+r.Stderr, token) {
		t.Fatalf("the program saw the token:\n%s%s", r.Stdout, r.Stderr)
	}
	for _, k := range []string{"environ", "mem", "fd", "maps", "task_environ", "boot_environ", "ptrace_server", "ptrace_boot"} {
		if got := saLine(t, r, k+" "); !strings.HasPrefix(got, "denied ") {
			t.Errorf("%s of the server: got %s, want denied", k, got)
		}
	}
	if got := saLine(t, r, "cmdline_has_token "); got != "False" {
		t.Errorf("a command line holds the token: %s", got)
	}
	saLine(t, r, "signals sent")
	for _, k := range []string{"kill_SIGKILL", "kill_SIGSTOP"} {
		// Refused by the run's signal guard (and dropped by the kernel, were it sent).
		if got := saLine(t, r, k+" "); got != "denied 1" {
			t.Errorf("%s to the server: got %s, want denied 1 (EPERM)", k, got)
		}
	}
	if got := saExec(t, s, "print(6*7)", 0); got.Stdout != "42\n" {
		t.Fatalf("after SIGKILL and SIGSTOP to the server: got %+v, want 42", got)
	}
	// SIGTERM from a program is refused too (it once killed the run, and
	// while no run was active it would have stopped the server).
	term := saExec(t, s, "import os, signal\ntry:\n    os.kill(1, signal.SIGTERM)\nexcept OSError as e:\n    print('refused', e.errno)\nprint('survived')", 0)
	if term.ExitCode != 0 || term.Stdout != "refused 1\nsurvived\n" {
		t.Errorf("a run that sent SIGTERM to the server: got %+v, want it refused (EPERM) and the run going on", term)
	}
	if got := saExec(t, s, "print(6*7)", 0); got.Stdout != "42\n" {
		t.Fatalf("after SIGTERM from a program: got %+v, want 42 (the server stays)", got)
	}
}

// TestStandaloneTokenFileRefused: a token file the server cannot remove (a read-only
// mount) stays readable to programs: the server refuses to start.
func TestStandaloneTokenFileRefused(t *testing.T) {
	img := saImage(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/token", []byte(e2e.Random()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	args := append([]string{"run", "--rm", "-i", "--name", saName(t)}, saLocked...)
	args = append(args, "-v", dir+":/run/secrets:ro", "-e", "MCP_EXEC_AUTH_TOKEN_FILE=/run/secrets/token", img)
	out, err := exec.Command("docker", args...).CombinedOutput()
	want := "the token file /run/secrets/token is still readable after start-up"
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("got %v:\n%s\nwant a refusal: %q", err, out, want)
	}
}

// TestStandaloneSelftest runs the selftest in this mode with docs/standalone.md's command and
// the runtime's default seccomp profile (on Docker 20.10 it allows io_uring: the
// per-run filter denies it): every line says whether the invariant holds per exec or
// only per container, the per-container ones pass, the probes written for a container
// per exec show exactly the documented differences, and nothing fails.
func TestStandaloneSelftest(t *testing.T) {
	img := saImage(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	args := append([]string{"run", "--rm", "--name", saName(t)}, saLocked...)
	args = append(args, img, "selftest")
	out, err := exec.CommandContext(ctx, "docker", args...).Output()
	t.Logf("selftest --backend process:\n%s", out)
	if err != nil {
		t.Errorf("selftest exited with %v, want 0", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL ") || strings.HasPrefix(l, "diff ") {
			n++
			if !strings.Contains(l, "[per exec") && !strings.Contains(l, "[per container") {
				t.Errorf("selftest line without its scope: %s", l)
			}
		}
	}
	if n < 20 {
		t.Fatalf("got %d selftest lines, want every probe", n)
	}
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^[0-9]+ passed, 0 failed, 5 documented differences, 2 not checked `).MatchString(last) {
		t.Errorf("selftest's last line: %q, want 0 failed, the 5 documented differences and the 2 host views not checked", last)
	}
	for _, name := range []string{"limits_enforced", "network_only_loopback", "capabilities_empty", "no_new_privs",
		"seccomp_filter_active", "seccomp_denies_dangerous_syscalls", "root_fs_read_only", "tmp_private_noexec_capped",
		"no_engine_socket", "fds_only_std", "bootstrap_unreachable", "memory_limit_kills_program", "memory_oom_reported_for_child", "pids_limit_stops_fork_bomb",
		"language_typescript", "typescript_timeout_kills_tree"} {
		if !regexp.MustCompile(`(?m)^ok +` + name + ` `).Match(out) {
			t.Errorf("selftest: %s did not pass", name)
		}
	}
	for _, name := range processDifferences {
		if !regexp.MustCompile(`(?m)^diff +` + name + ` +documented difference of the process backend: `).Match(out) {
			t.Errorf("selftest: %s is not the documented difference", name)
		}
	}
}

// TestStandaloneE2E runs the TypeScript client's battery (scripts/e2e/client.mjs,
// the official TypeScript SDK) against the standalone image: over stdio (the client
// spawns docs/standalone.md's docker run line) and over streamable HTTP on an internal network
// (no route out, egress stated and probed, a token).
func TestStandaloneE2E(t *testing.T) {
	img := saImage(t)
	dir, node := e2e.Node(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}

	t.Run("stdio", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "standalone.sh")
		args := append([]string{"docker", "run", "--rm", "-i", "--name", saName(t)}, saLocked...)
		args = append(args, img)
		if err := os.WriteFile(script, []byte("#!/bin/sh\nexec "+strings.Join(args, " ")+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		e2e.ExpectChecks(t, e2e.RunClient(t, node, dir, env, "--transport", "stdio", "--cmd", script))
	})

	t.Run("http", func(t *testing.T) {
		net := fmt.Sprintf("mcpx-standalone-e2e-%d", os.Getpid())
		if out, err := exec.Command("docker", "network", "create", "--internal", "--subnet", "10.213.78.0/24", net).CombinedOutput(); err != nil {
			t.Fatalf("creating network: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", net).Run() })
		token := e2e.Random()
		name := saName(t)
		args := append([]string{"run", "-d", "--name", name}, replaced(saLocked, "--network", net)...)
		args = append(args, "--ip", "10.213.78.10", "-e", "MCP_EXEC_TRANSPORT=http",
			"-e", "MCP_EXEC_STANDALONE_EGRESS_DENIED=true", "-e", "MCP_EXEC_AUTH_TOKEN_SHA256="+tokenSHA256(token), img)
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			t.Fatalf("starting: %v: %s", err, out)
		}
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command("docker", "logs", name).CombinedOutput()
				t.Logf("server logs:\n%s", out)
			}
		})
		base := "http://10.213.78.10:8080"
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, _ := exec.Command("docker", "logs", name).CombinedOutput()
			if strings.Contains(string(out), "process backend ready") && strings.Contains(string(out), `"message":"serving"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not ready after 60 s:\n%s", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		e2e.ExpectChecks(t, e2e.RunClient(t, node, dir, env, "--transport", "http", "--url", base+"/mcp", "--token", token))
	})
}

// TestStandaloneRestarts: should the server end anyway (here: SIGTERM to PID 1 while
// idle, from a process in the container), the restart policy of the deployments brings
// it back, and it serves again with nothing of before.
func TestStandaloneRestarts(t *testing.T) {
	img := saImage(t)
	net := fmt.Sprintf("mcpx-standalone-rs-%d", os.Getpid())
	if out, err := exec.Command("docker", "network", "create", "--internal", "--subnet", "10.213.79.0/24", net).CombinedOutput(); err != nil {
		t.Fatalf("creating network: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", net).Run() })
	token := e2e.Random()
	name := saName(t)
	args := append([]string{"run", "-d", "--restart", "unless-stopped", "--name", name}, replaced(saLocked, "--network", net)...)
	args = append(args, "--ip", "10.213.79.10", "-e", "MCP_EXEC_TRANSPORT=http",
		"-e", "MCP_EXEC_STANDALONE_EGRESS_DENIED=true", "-e", "MCP_EXEC_AUTH_TOKEN_SHA256="+tokenSHA256(token), img)
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("starting: %v: %s", err, out)
	}
	servings := func() int {
		out, _ := exec.Command("docker", "logs", name).CombinedOutput()
		return strings.Count(string(out), `"message":"serving"`)
	}
	waitServing := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); servings() < n; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				out, _ := exec.Command("docker", "logs", name).CombinedOutput()
				t.Fatalf("not serving (%d times) after 90 s:\n%s", n, out)
			}
		}
	}
	call := func() saResult {
		t.Helper()
		s, err := mcp.NewClient(&mcp.Implementation{Name: "standalone-restart", Version: "0"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: "http://10.213.79.10:8080/mcp", HTTPClient: &http.Client{Transport: e2e.HeaderTransport{Token: token}}}, nil)
		if err != nil {
			t.Fatalf("connecting: %v", err)
		}
		defer s.Close()
		return saExec(t, s, "print(6*7)", 0)
	}
	waitServing(1)
	if r := call(); r.Stdout != "42\n" {
		t.Fatalf("before: got %+v", r)
	}
	// A SIGTERM within quietAfter of a run's end may be that run's (its sender just
	// gone): the server does not obey it. Later, it stops.
	time.Sleep(quietAfter + 500*time.Millisecond)
	if out, err := exec.Command("docker", "exec", name, "python3", "-c", "import os; os.kill(1, 15)").CombinedOutput(); err != nil {
		t.Fatalf("signalling the server: %v: %s", err, out)
	}
	waitServing(2)
	out, _ := exec.Command("docker", "inspect", "-f", "{{.RestartCount}}", name).Output()
	if strings.TrimSpace(string(out)) != "1" {
		t.Errorf("restart count: got %s, want 1", out)
	}
	if r := call(); r.Stdout != "42\n" {
		t.Fatalf("after the restart: got %+v", r)
	}
}

// saLauncherTests are the launcher suite's tests of the tool contract that need no
// engine: programs and their results, timeouts killing the tree, cancel, close,
// files in and out, progress, queue time, code mode's bridge (calls, forged frames,
// limits), and the same for bash and JavaScript (TestLanguage*, TestCheckLanguages).
const saLauncherTests = `^(TestRunHello|TestLanguagePrograms|TestLanguageTimeoutKillsTree|TestLanguageMemoryLimit|TestCheckLanguages|TestRunPrograms|TestTimeoutKillsProcessTree|TestCancelRemovesContainer|TestCloseEndsRuns|TestCloseLetsRunsFinish|TestOpenFilesFlushedAtExit|TestFilesInAndOut|TestProgress|TestQueueTimeNotCounted|TestBridgeCall|TestBridgeForgedFrames|TestBridgeLimits|TestBridgeJavaScript|TestBridgeJavaScriptForged|TestBridgeJavaScriptRequire)$`

// TestStandaloneLauncherSuite runs the launcher's contract tests against the process
// backend inside the standalone image, locked down as docs/standalone.md says: the test
// binary plays the server (MCP_EXEC_TEST_BACKEND=process).
func TestStandaloneLauncherSuite(t *testing.T) {
	img := saImage(t)
	bin := filepath.Join(t.TempDir(), "launcher.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "../launcher")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the launcher tests: %v\n%s", err, out)
	}
	args := append([]string{"run", "--rm", "--name", saName(t)}, saLocked...)
	args = append(args, "-v", bin+":/usr/local/bin/launcher.test:ro", "-e", "MCP_EXEC_TEST_BACKEND=process", "-e", "CI=true",
		"--entrypoint", "/usr/local/bin/launcher.test", img, "-test.run", saLauncherTests, "-test.v", "-test.count=1", "-test.timeout=10m")
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	var summary strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "    --- ") || l == "PASS" || l == "FAIL" {
			summary.WriteString(l + "\n")
		}
	}
	t.Logf("launcher suite in the standalone image:\n%s", summary.String())
	if err != nil || !strings.Contains(string(out), "\nPASS\n") || strings.Count(summary.String(), "--- PASS: Test") < 10 {
		t.Fatalf("launcher suite: %v\n%s", err, out)
	}
}
