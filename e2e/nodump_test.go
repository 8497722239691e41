package e2e_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestEverySubcommandNonDumpable: each subcommand of the real binary, held while it
// runs (its engine a socket that never answers, its healthcheck target a listener
// that never replies, its stdout and stderr full pipes), has its /proc/<pid>/environ
// closed to a process of the same user (a dumpable healthcheck
// handed the container's environment, token included, to every program). The control,
// a dumpable process of that user with the same marker, is readable: the reader would
// see a leak. As root, the children and the reader run as 65532 (root could read
// anything).
func TestEverySubcommandNonDumpable(t *testing.T) {
	built := e2e.Build(t)
	dir, err := os.MkdirTemp("", "mcp-exec-nodump-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "mcp-exec")
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65532, Gid: 65532}
	}

	// An engine that accepts and never answers, and an HTTP server that does the same.
	sock := filepath.Join(dir, "engine.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	os.Chmod(sock, 0o777)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	accepted := make(chan net.Conn, 16)
	for _, l := range []net.Listener{ul, tl} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
	}

	marker := "nodump-marker-" + e2e.Random()
	env := []string{"PATH=/usr/bin:/bin", "MCP_EXEC_TEST_MARKER=" + marker,
		"DOCKER_HOST=unix://" + sock, "MCP_EXEC_BACKEND=docker"}
	// fullPipe returns the write end of a pipe whose buffer is full: the child's first
	// write to it blocks.
	fullPipe := func() *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		fd := int(w.Fd()) // once: each Fd call makes the descriptor blocking again
		syscall.SetNonblock(fd, true)
		chunk := bytes.Repeat([]byte("x"), 4096)
		for n := len(chunk); n > 0; n /= 2 {
			for {
				if _, err := syscall.Write(fd, chunk[:n]); err != nil {
					break
				}
			}
		}
		syscall.SetNonblock(fd, false)
		return w
	}
	readEnviron := func(pid int) (string, error) {
		cmd := exec.Command("/bin/cat", "/proc/"+strconv.Itoa(pid)+"/environ")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	start := func(t *testing.T, path string, args []string, extra ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(path, args...)
		cmd.Env = append(append([]string{}, env...), extra...)
		cmd.Stdout, cmd.Stderr = fullPipe(), fullPipe()
		stdin, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		cmd.Stdin = stdin
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	// blocked waits until the process sleeps (its write, connection or read blocks)
	// several times in a row: past its start-up, which runs without sleeping.
	blocked := func(t *testing.T, pid int) {
		t.Helper()
		n := 0
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			if err != nil {
				t.Fatalf("the process ended before it could be checked: %v", err)
			}
			if strings.Contains(string(st), "\nState:\tS") {
				if n++; n == 4 {
					return
				}
			} else {
				n = 0
			}
		}
		t.Fatal("the process never blocked")
	}

	t.Run("control", func(t *testing.T) {
		c := start(t, "/bin/sleep", []string{"60"})
		blocked(t, c.Process.Pid)
		out, err := readEnviron(c.Process.Pid)
		if err != nil || !strings.Contains(out, marker) {
			t.Fatalf("a dumpable process of the same user: environ not readable (%v: %q): the check proves nothing", err, out)
		}
	})

	for _, tc := range []struct {
		name  string
		args  []string
		extra []string
	}{
		{"serve", nil, nil},
		{"serve-http", []string{"serve"}, []string{"MCP_EXEC_TRANSPORT=http", "MCP_EXEC_ADDR=127.0.0.1:0"}},
		{"run", []string{"run", "-"}, nil},
		{"selftest", []string{"selftest"}, nil},
		{"healthcheck", []string{"healthcheck"}, []string{"MCP_EXEC_TRANSPORT=http", "MCP_EXEC_ADDR=" + tl.Addr().String()}},
		{"healthcheck-stdio", []string{"healthcheck"}, nil},
		{"seccomp-profile", []string{"seccomp-profile"}, nil},
		{"version", []string{"version"}, nil},
		{"help", []string{"--help"}, nil},
		{"unknown", []string{"no-such-subcommand"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, bin, tc.args, tc.extra...)
			blocked(t, c.Process.Pid)
			for len(accepted) > 0 {
				held = append(held, <-accepted)
			}
			out, err := readEnviron(c.Process.Pid)
			if err == nil || strings.Contains(out, marker) {
				t.Fatalf("mcp-exec %s: a process of the same user read its environ (%v): %q", strings.Join(tc.args, " "), err, out)
			}
			if !strings.Contains(out, "Permission denied") {
				t.Fatalf("mcp-exec %s: environ not read, but not for want of permission: %v: %q", strings.Join(tc.args, " "), err, out)
			}
		})
	}
}
