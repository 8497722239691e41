package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sshSpec is an ssh://[USER@]HOST[:PORT][/SOCKET] engine address.
type sshSpec struct {
	user, host, port string
	socket           string // the engine's socket on that host; empty: the remote CLI's default
}

func parseSSH(addr string) (sshSpec, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return sshSpec{}, fmt.Errorf("engine host %q: %w", addr, err)
	}
	bad := func(why string) (sshSpec, error) {
		return sshSpec{}, fmt.Errorf("engine host %q: %s", addr, why)
	}
	if u.Scheme != "ssh" {
		return bad("not an ssh:// address")
	}
	var s sshSpec
	if u.User != nil {
		if _, set := u.User.Password(); set {
			return bad("a password in the address is not supported; use a key (ssh-agent or the ssh configuration)")
		}
		s.user = u.User.Username()
	}
	s.host, s.port = u.Hostname(), u.Port()
	switch {
	case s.host == "":
		return bad("no host")
	case u.RawQuery != "" || u.Fragment != "":
		return bad("a query or fragment after the host is not supported")
	case strings.HasPrefix(s.host, "-") || strings.HasPrefix(s.user, "-"):
		return bad("a host or user may not start with '-'")
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		// It becomes part of the remote command line, which the remote shell parses.
		if strings.IndexFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+@", r))
		}) >= 0 {
			return bad("the socket path may only hold letters, digits and / . _ - + @")
		}
		s.socket = p
	}
	return s, nil
}

// clientHost is the address the engine client is given (and reports as DaemonHost).
func (s sshSpec) clientHost() string {
	h := s.host
	if s.port != "" {
		h = net.JoinHostPort(s.host, s.port)
	} else if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return "ssh://" + h
}

func (s sshSpec) String() string {
	h := s.clientHost()
	if s.user != "" {
		h = "ssh://" + s.user + "@" + strings.TrimPrefix(h, "ssh://")
	}
	return h + s.socket
}

// args are ssh's arguments, as the Docker CLI builds them: a connect timeout, no
// terminal, the user and port as options, "--", the host and the remote command. One
// addition: BatchMode, since a server has no terminal to ask a password, a passphrase
// or whether to trust an unknown host key on; ssh fails instead. Host keys are checked
// as the user's ssh configuration says; nothing here relaxes that.
func (s sshSpec) args() []string {
	a := []string{"-o", "ConnectTimeout=30", "-o", "BatchMode=yes", "-T"}
	if s.user != "" {
		a = append(a, "-l", s.user)
	}
	if s.port != "" {
		a = append(a, "-p", s.port)
	}
	a = append(a, "--", s.host, "docker")
	if s.socket != "" {
		a = append(a, "--host", "unix://"+s.socket)
	}
	return append(a, "system", "dial-stdio")
}

// sshDialer dials the engine through a new ssh process per connection.
type sshDialer struct {
	spec    sshSpec
	command string // "ssh", found in PATH
}

func (d sshDialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return startCmdConn(d.command, d.spec.args(), d.spec.String())
}

// cmdConn is a net.Conn over a child process's stdin and stdout. Close (or the other
// end closing) ends the process and every process it started (its own group).
type cmdConn struct {
	name   string // for errors and addresses, e.g. ssh://user@host
	cmd    *exec.Cmd
	stdin  *os.File // write end of the child's stdin
	stdout *os.File // read end of the child's stdout
	stderr *tailBuffer
	done   chan struct{} // closed once the child has been waited for
	err    error         // the child's exit status, valid after done

	gotData    atomic.Bool // the engine has sent something
	closeWrite sync.Once
	closeOnce  sync.Once
	closed     chan struct{} // closed by Close
}

var _ interface {
	net.Conn
	CloseWrite() error
} = (*cmdConn)(nil)

func startCmdConn(command string, args []string, name string) (_ *cmdConn, err error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", name, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("connecting to %s: %w", name, err)
	}
	c := &cmdConn{
		name:   name,
		cmd:    exec.Command(command, args...),
		stdin:  inW,
		stdout: outR,
		stderr: &tailBuffer{max: 4 << 10},
		done:   make(chan struct{}),
		closed: make(chan struct{}),
	}
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = inR, outW, c.stderr
	// Without the server's DOCKER_HOST: a configuration that sends the environment
	// along (SendEnv) must not point the remote CLI back at an ssh:// address.
	c.cmd.Env = withoutEnv(os.Environ(), envHost)
	// Its own process group: a Ctrl-C meant for the server does not cut its engine
	// connections before a graceful shutdown, and Close can end the whole group.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.cmd.WaitDelay = 2 * time.Second
	err = c.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("connecting to %s: starting %s: %w", name, command, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *cmdConn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if n > 0 {
		c.gotData.Store(true)
	}
	if err == nil {
		return n, nil
	}
	if errors.Is(err, io.EOF) && c.gotData.Load() {
		// The engine answered before, so this is the end of its stream, not a failure
		// to connect; the process may linger until its input is closed too.
		return n, io.EOF
	}
	return n, c.failed("read", err)
}

func (c *cmdConn) Write(p []byte) (int, error) {
	n, err := c.stdin.Write(p)
	if err == nil {
		return n, nil
	}
	return n, c.failed("write", err)
}

// failed turns an error of the pipes into what the caller should see: after our own
// Close, net.ErrClosed; when the process ended with an error, that error and the last
// of its stderr (ssh's reason, e.g. "Host key verification failed."); a clean end is
// io.EOF for reads.
func (c *cmdConn) failed(op string, err error) error {
	select {
	case <-c.closed:
		return &net.OpError{Op: op, Net: "ssh", Addr: c.RemoteAddr(), Err: net.ErrClosed}
	default:
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	// The pipe ended because the process is ending: give it a moment to say why.
	select {
	case <-c.done:
	case <-time.After(3 * time.Second):
	}
	select {
	case <-c.done:
		if c.err == nil {
			if op == "read" && errors.Is(err, io.EOF) {
				return io.EOF
			}
			break
		}
		msg := strings.TrimSpace(c.stderr.String())
		if msg == "" {
			msg = "(no message)"
		}
		return &net.OpError{Op: op, Net: "ssh", Addr: c.RemoteAddr(),
			Err: fmt.Errorf("%s: %w: %s", c.cmd.Path, c.err, msg)}
	default:
	}
	if op == "read" && errors.Is(err, io.EOF) {
		return io.EOF
	}
	return &net.OpError{Op: op, Net: "ssh", Addr: c.RemoteAddr(), Err: err}
}

// CloseWrite closes the child's stdin, so that the engine sees the end of the input
// (dial-stdio half-closes its connection to the engine in turn).
func (c *cmdConn) CloseWrite() error {
	var err error
	c.closeWrite.Do(func() { err = c.stdin.Close() })
	return err
}

// Close ends the connection: it closes the pipes and kills the process group.
func (c *cmdConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.CloseWrite()
		c.stdout.Close()
		select {
		case <-c.done:
		default:
			// The child leads its group (Setpgid); it has not been reaped, so the
			// group id is still its own.
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		}
		<-c.done
	})
	return nil
}

func (c *cmdConn) LocalAddr() net.Addr  { return cmdAddr("mcp-exec") }
func (c *cmdConn) RemoteAddr() net.Addr { return cmdAddr(c.name) }

func (c *cmdConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}
func (c *cmdConn) SetReadDeadline(t time.Time) error  { return c.stdout.SetReadDeadline(t) }
func (c *cmdConn) SetWriteDeadline(t time.Time) error { return c.stdin.SetWriteDeadline(t) }

type cmdAddr string

func (a cmdAddr) Network() string { return "ssh" }
func (a cmdAddr) String() string  { return string(a) }

// tailBuffer keeps the last max bytes written to it: the child's diagnostics.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// withoutEnv returns env without the variable name.
func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
