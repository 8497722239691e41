// Package proxy is the egress proxy: a forward proxy in the server that
// lets a sandbox with an egress profile reach the hosts its profile names, and nothing
// else. It speaks HTTP CONNECT (for TLS, which it intercepts only for a host its profile
// has inject rules for: intercept.go) and plain HTTP with an absolute URI to a Channel of
// the sandbox's own: on a Unix socket that the backend
// bind-mounts into that sandbox alone, or on connections the backend carries to it
// (ServeEgress: Kubernetes' port-forward). The sandbox itself keeps no network.
//
// The sandbox's program is hostile; the invariants, each kept where named:
//   - Which profile applies is decided by the Channel a connection arrived on, never
//     by anything the sandbox sends: one Channel per sandbox, one profile per Channel.
//   - A name and port are checked against the profile before any lookup, counted
//     against its caps (egress.Counter, reset per call by ResetCaps), resolved and
//     vetted by egress.Profile.Resolve, and only a vetted address is dialled (serve).
//   - A refusal is a 403 with the egress.Denial's text (writeStatus); the log line
//     holds no path, header, body or name the program chose (logRecord).
//   - Close ends every connection of a Channel and removes its directory; New removes
//     only the directories that servers proven gone left (DirPrefix, stale).
//   - A host with inject rules gets the rule's headers only after the proxy has
//     verified the real host's certificate, over TLS the program opened to a leaf of
//     the Server's CA, whose key stays in memory and whose name constraints permit only
//     the injected hosts; only its profile's Channels carry the CA's bundle (intercept.go).
//   - The audit log (Audit) has metadata only: never a header's value, a body or a query.
//
// docs/egress.md tells how backends carry a Channel, and the threat model.
package proxy

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// SocketName is the name of a Channel's socket in its directory.
const SocketName = "proxy.sock"

const (
	maxHead     = 64 << 10         // bytes of a request line and headers
	headTimeout = 10 * time.Second // to send the request head
	dialTimeout = 10 * time.Second // per vetted address
	maxActive   = 64               // connections of one Channel at once
)

// Server opens Channels for the profiles it was given.
type Server struct {
	profiles *egress.Profiles
	dir      string
	prefix   string // of this instance's Channel directories: "sb-" + tag + "-"
	self     owner.ID
	proc     owner.Proc
	resolver egress.Resolver
	own      []netip.Prefix
	log      zerolog.Logger
	dial     func(ctx context.Context, a netip.AddrPort) (net.Conn, error) // tests replace it

	// hashKey is nameHash's key: random, per Server, never logged.
	hashKey []byte

	// For the profiles' inject rules (intercept.go): the CA, nil without rules; the
	// bundle their sandboxes trust; the roots the real hosts are verified against.
	ca            *authority
	bundle        []byte
	upstreamRoots *x509.CertPool
	sessions      tls.ClientSessionCache // of the real hosts' TLS, shared by Channels
	audit         *Audit                 // nil: no audit log
}

// New returns a Server whose Channels live in directories under dir, which it creates
// (mode 0700: only the server's user and root can reach a socket through it). The
// server's own interface addresses are refused on top of what egress.Vet refuses.
// Channel directories that an earlier run of the same instance left in dir (its
// process was killed before it could remove them) are removed, once their owner is
// proven gone when self names this process (servers may share an instance name);
// those of live servers and of other instances sharing dir are not touched.
//
// With dir "", Channels have no socket: the backend carries each sandbox's
// connections to its Channel's ServeEgress (the Kubernetes backend's port-forward
// streams), and which profile applies is decided by the Channel the backend hands a
// connection to, which it opened for that sandbox alone.
func New(profiles *egress.Profiles, dir, instance string, self owner.ID, log zerolog.Logger) (*Server, error) {
	s := &Server{profiles: profiles, dir: dir, prefix: DirPrefix(instance), self: self, resolver: net.DefaultResolver, log: log, dial: dialAddr}
	s.hashKey = make([]byte, 32)
	_, _ = rand.Read(s.hashKey)
	if err := s.initInject(); err != nil {
		return nil, err
	}
	if dir != "" {
		if err := s.makeDir(); err != nil {
			return nil, err
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing the server's own addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				ip = ip.Unmap()
				s.own = append(s.own, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return s, nil
}

// makeDir makes the sockets' directory and removes what an earlier run left in it.
func (s *Server) makeDir() error {
	dir, log := s.dir, s.log
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("egress socket directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("egress socket directory: %w", err)
	}
	if n, err := s.removeStale(); err != nil {
		return fmt.Errorf("egress socket directory: removing an earlier run's channels: %w", err)
	} else if n > 0 {
		log.Info().Int("channels", n).Str("dir", dir).Msg("removed egress channel directories left by an earlier run of this instance")
	}
	return nil
}

// DirPrefix is how the names of an instance's Channel directories begin: "sb-", 8 hex
// digits of the instance name's SHA-256 (fixed length: a socket's path is limited to
// 107 bytes), "-".
func DirPrefix(instance string) string {
	h := sha256.Sum256([]byte(instance))
	return "sb-" + hex.EncodeToString(h[:4]) + "-"
}

// removeStale removes the directories of s.prefix in s.dir that no live server holds:
// at New, none of them belongs to a Channel of this process, but one may be another
// live server's of the same instance name.
func (s *Server) removeStale() (int, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), s.prefix) || !s.stale(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		_ = os.Remove(filepath.Join(s.dir, e.Name()+ownerSuffix))
		n++
	}
	return n, errors.Join(errs...)
}

// ownerSuffix names the file beside a Channel directory that holds its server's
// owner.ID.
const ownerSuffix = ".owner"

// stale says whether the Channel directory name is a server's now gone: its owner file
// names a process proven gone, or there is none (a server before owner files, or one
// killed between the directory and the file). Without a self, every one is.
func (s *Server) stale(name string) bool {
	if s.self.IsZero() {
		return true
	}
	b, err := os.ReadFile(filepath.Join(s.dir, name+ownerSuffix))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	o, err := owner.Parse(strings.TrimSpace(string(b)))
	return err == nil && s.proc.Judge(s.self, o) == owner.Gone
}

// Profiles returns the profiles the Server serves.
func (s *Server) Profiles() *egress.Profiles { return s.profiles }

// SetResolver replaces the resolver (tests).
func (s *Server) SetResolver(r egress.Resolver) { s.resolver = r }

// Open starts a Channel for one sandbox with the named profile (launcher.EgressChannels):
// its Dir holds its socket, to be bind-mounted into that sandbox only, or is "" for a
// Server without a socket directory, whose backend hands the sandbox's connections to
// its ServeEgress. Its audit lines carry label.
func (s *Server) Open(_ context.Context, profile string, label backend.AuditLabel) (backend.EgressChannel, error) {
	c, err := s.openChannel(profile, label)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// OpenChannel is Open returning the Channel, without a label.
func (s *Server) OpenChannel(profile string) (*Channel, error) {
	return s.openChannel(profile, backend.AuditLabel{})
}

func (s *Server) openChannel(profile string, label backend.AuditLabel) (*Channel, error) {
	p, ok := s.profiles.Lookup(profile)
	if !ok {
		return nil, fmt.Errorf("egress profile %q is not configured", profile)
	}
	var dir string
	var ln *net.UnixListener
	if s.dir != "" {
		var err error
		if dir, ln, err = s.listen(); err != nil {
			return nil, fmt.Errorf("egress channel: %w", err)
		}
	}
	bundle := s.ca != nil && len(p.InjectHosts()) > 0
	if bundle && dir != "" {
		if err := s.writeBundle(dir); err != nil {
			ln.Close()
			removeChannelDir(dir)
			return nil, fmt.Errorf("egress channel: writing the CA bundle: %w", err)
		}
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Channel{
		s: s, p: p, dir: dir, ln: ln, counter: p.NewCounter(), bundle: bundle, id: hex.EncodeToString(id), label: label,
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{},
	}
	if ln != nil {
		c.wg.Add(1)
		go c.accept()
	}
	return c, nil
}

// listen makes a fresh Channel directory and its socket.
func (s *Server) listen() (string, *net.UnixListener, error) {
	dir, err := os.MkdirTemp(s.dir, s.prefix)
	if err != nil {
		return "", nil, err
	}
	if !s.self.IsZero() {
		if err := os.WriteFile(dir+ownerSuffix, []byte(s.self.String()), 0o600); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
	}
	// The sandbox's user needs to search the directory, not to list it.
	if err := os.Chmod(dir, 0o711); err != nil {
		removeChannelDir(dir)
		return "", nil, err
	}
	path := filepath.Join(dir, SocketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		removeChannelDir(dir)
		return "", nil, err
	}
	ln.SetUnlinkOnClose(true)
	// The sandbox runs as another user than the server: it must be able to connect.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		removeChannelDir(dir)
		return "", nil, err
	}
	return dir, ln, nil
}

// removeChannelDir removes a Channel's directory and its owner file.
func removeChannelDir(dir string) error {
	err := os.RemoveAll(dir)
	if rmErr := os.Remove(dir + ownerSuffix); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
		err = rmErr
	}
	return err
}

// OpenCheck starts a channel that serves no profile, for the launcher's start-up check
// (launcher.CheckEgress): it answers every connection with token and a newline, then
// closes it; nothing is read, resolved or dialled. The token is random, so that no
// other socket or stream can pass for it. Its Dir is "" for a Server without a socket
// directory, as Open's.
func (s *Server) OpenCheck(context.Context) (backend.EgressChannel, string, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	c := &checkChannel{token: "mcp-exec-egress-check-" + hex.EncodeToString(b)}
	if s.dir != "" {
		var err error
		if c.dir, c.ln, err = s.listen(); err != nil {
			return nil, "", fmt.Errorf("egress check channel: %w", err)
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for {
				conn, err := c.ln.Accept()
				if err != nil {
					return // closed
				}
				c.ServeEgress(conn)
			}
		}()
	}
	return c, c.token, nil
}

// checkChannel is OpenCheck's channel.
type checkChannel struct {
	token string
	dir   string
	ln    *net.UnixListener
	wg    sync.WaitGroup
	once  sync.Once
}

func (c *checkChannel) Dir() string { return c.dir }
func (c *checkChannel) ResetCaps()  {}

// ServeEgress answers conn with the token and closes it.
func (c *checkChannel) ServeEgress(conn net.Conn) {
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(conn, c.token+"\n")
	conn.Close()
}

func (c *checkChannel) Close() error {
	var err error
	c.once.Do(func() {
		if c.ln == nil {
			return
		}
		err = c.ln.Close()
		c.wg.Wait()
		if rmErr := removeChannelDir(c.dir); rmErr != nil && err == nil {
			err = rmErr
		}
	})
	return err
}

// Channel is one sandbox's socket to the proxy, bound to one profile.
type Channel struct {
	s       *Server
	p       *egress.Profile
	dir     string
	ln      *net.UnixListener
	counter *egress.Counter
	ctx     context.Context
	cancel  context.CancelFunc
	bundle  bool               // its sandbox trusts the CA bundle (CABundle), in its directory if it has one
	id      string             // random, for the audit log's lines of this sandbox
	label   backend.AuditLabel // what the sandbox serves, for the audit log

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	idle   map[string][]*upstream // by host:port, to hosts with inject rules (intercept.go)
	closed bool
	wg     sync.WaitGroup
	once   sync.Once
}

// Dir is the host directory that holds the Channel's socket.
func (c *Channel) Dir() string { return c.dir }

// Used returns the connections opened and bytes carried so far.
func (c *Channel) Used() (connections, bytes int64) { return c.counter.Used() }

// ResetCaps starts a new call's caps: a session's sandbox keeps its Channel across
// calls, and a profile's caps count per call. Connections already open stay open and
// count against the new call from now on.
func (c *Channel) ResetCaps() { c.counter.Reset() }

// Close stops the Channel, ends its connections and removes its directory.
func (c *Channel) Close() error {
	var err error
	c.once.Do(func() {
		c.cancel()
		if c.ln != nil {
			err = c.ln.Close()
		}
		c.mu.Lock()
		c.closed = true
		for conn := range c.conns {
			conn.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
		if c.dir == "" {
			return
		}
		if rmErr := removeChannelDir(c.dir); rmErr != nil && err == nil {
			err = rmErr
		}
	})
	return err
}

// admit registers a connection for Close and counts it in wg, or refuses it past
// maxActive or once closed (both under mu: Close's Wait never races an Add).
func (c *Channel) admit(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.conns) >= maxActive {
		return false
	}
	c.conns[conn] = struct{}{}
	c.wg.Add(1)
	return true
}

func (c *Channel) drop(conn net.Conn) {
	c.mu.Lock()
	delete(c.conns, conn)
	c.mu.Unlock()
	conn.Close()
}

func (c *Channel) accept() {
	defer c.wg.Done()
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return // closed
		}
		go c.ServeEgress(conn)
	}
}

// ServeEgress serves one connection of the Channel's sandbox until it ends, and closes
// it (backend.EgressServer): the socket's, or one its backend carried (a Channel
// without a socket). Past maxActive connections at once, or once the Channel is
// closed, the connection is closed at once.
func (c *Channel) ServeEgress(conn net.Conn) {
	if !c.admit(conn) {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if !closed {
			c.s.log.Warn().Str("profile", c.p.Name()).Str("decision", "denied").
				Str("reason", "too_many_connections").Msg("egress")
		}
		conn.Close()
		return
	}
	defer c.wg.Done()
	defer c.drop(conn)
	c.serve(conn)
}

// record is what one connection's log line says.
type record struct {
	host           string
	port           int
	method         string // CONNECT or HTTP
	reason         string
	up, down       int64
	began          time.Time
	denied, failed bool
	intercepted    bool // TLS terminated for inject rules
}

// logRecord writes the connection's one log line: profile, host, port, decision,
// reason and byte counts; never a request path, a header or a body.
func (c *Channel) logRecord(r *record) {
	decision := "allowed"
	lvl := c.s.log.Info()
	switch {
	case r.denied:
		decision = "denied"
		lvl = c.s.log.Warn()
	case r.failed:
		decision = "failed"
		lvl = c.s.log.Warn()
	}
	// The host is logged only when the profile names it exactly: then it is the
	// operator's text. Any other name is the program's, and a program could spell
	// data in it; under a wildcard the log has the wildcard and a keyed hash.
	host, hash := c.logHost(r.host)
	c.s.auditConn(c, r, decision, host, hash)
	ev := lvl.Str("profile", c.p.Name()).Str("method", r.method).Str("host", host)
	if hash != "" {
		ev = ev.Str("host_hash", hash)
	}
	ev.Bool("host_redacted", r.host != "" && (host == "" || hash != "")).Int("port", r.port).
		Str("decision", decision).Str("reason", r.reason).
		Int64("bytes_up", r.up).Int64("bytes_down", r.down).
		Int64("duration_ms", time.Since(r.began).Milliseconds()).Msg("egress")
}

// logHost is how a connection's host is logged: the profile's entry when it names it
// exactly, else the wildcard entry with a keyed hash of the name, else nothing.
func (c *Channel) logHost(name string) (host, hash string) {
	if entry, canon, ok := c.p.Entry(name); ok {
		host = entry
		if entry != canon {
			hash = c.s.nameHash(canon)
		}
	}
	return host, hash
}

// headReader limits what the request head may take; lifted once it is read.
type headReader struct {
	r    io.Reader
	left int64
	on   bool
}

func (h *headReader) Read(p []byte) (int, error) {
	if !h.on {
		return h.r.Read(p)
	}
	if h.left <= 0 {
		return 0, errors.New("request head too large")
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= int64(n)
	return n, err
}

// serve reads one request head (at most maxHead bytes within headTimeout) and decides
// it; after the head, bytes are only relayed (CONNECT) or the one request is forwarded
// (plain HTTP), and the connection ends.
func (c *Channel) serve(conn net.Conn) {
	r := &record{began: time.Now()}
	defer c.logRecord(r)
	hr := &headReader{r: conn, left: maxHead, on: true}
	br := bufio.NewReader(hr)
	_ = conn.SetReadDeadline(time.Now().Add(headTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		r.method, r.failed, r.reason = "?", true, "bad_request"
		writeStatus(conn, http.StatusBadRequest, "egress: could not read the request head")
		return
	}
	hr.on = false
	_ = conn.SetReadDeadline(time.Time{})

	host, port, denial := target(req)
	r.method, r.host, r.port = "HTTP", host, port
	if req.Method == http.MethodConnect {
		r.method = "CONNECT"
	}
	if denial != nil {
		c.deny(conn, r, denial)
		return
	}
	// Counted before the lookup, which is work the program chooses (any name under
	// a wildcard): past the cap it gets none. A name the profile refuses is neither
	// looked up nor counted.
	if err := c.p.AllowName(host, port); err != nil {
		c.deny(conn, r, err)
		return
	}
	if err := c.counter.Connect(); err != nil {
		c.deny(conn, r, err)
		return
	}
	addrs, err := c.p.Resolve(c.ctx, c.s.resolver, host, port, c.s.own)
	if err != nil {
		c.deny(conn, r, err)
		return
	}
	if hs := c.p.Inject(host); r.method == "CONNECT" && len(hs) > 0 && c.s.ca != nil {
		_, name, _ := c.p.Entry(host) // canonical: the one the rule and the leaf name
		c.intercept(conn, br, addrs, name, port, hs, r)
		return
	}
	up, err := c.s.dialVetted(c.ctx, addrs)
	if err != nil {
		r.failed, r.reason = true, "dial_failed"
		writeStatus(conn, http.StatusBadGateway, fmt.Sprintf("egress: could not connect to %q port %d", host, port))
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		up.Close()
		return
	}
	c.conns[up] = struct{}{}
	c.mu.Unlock()
	defer c.drop(up)

	if r.method == "CONNECT" {
		if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		// Bytes the client sent after the head (a pipelined ClientHello) are in br.
		c.pipe(conn, up, io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn), r)
		return
	}
	// Plain HTTP: forward this one request in origin form, then relay the answer.
	req.RequestURI = ""
	// The Host header is the name that was checked: another one would reach another
	// site served from the same address (a CDN's), which the profile does not name.
	req.Host = req.URL.Host
	for k := range req.Header {
		if strings.HasPrefix(strings.ToLower(k), "proxy-") {
			req.Header.Del(k)
		}
	}
	req.Close = true
	cw := &countWriter{w: up, c: c.counter}
	if err := req.Write(cw); err != nil {
		r.up = cw.n
		if isCap(err) {
			r.denied, r.reason = true, capReason(err)
		}
		return
	}
	r.up = cw.n
	n, err := countedCopy(conn, up, c.counter)
	r.down = n
	if isCap(err) {
		r.denied, r.reason = true, capReason(err)
	}
}

// pipe relays both ways until either side ends or a cap is reached.
func (c *Channel) pipe(client, up net.Conn, fromClient io.Reader, r *record) {
	var wg sync.WaitGroup
	var capErr error
	var mu sync.Mutex
	note := func(err error) {
		if isCap(err) {
			mu.Lock()
			capErr = err
			mu.Unlock()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, err := countedCopy(up, fromClient, c.counter)
		r.up = n
		note(err)
		if cw, ok := up.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
		} else {
			up.Close()
			client.Close()
		}
	}()
	n, err := countedCopy(client, up, c.counter)
	note(err)
	r.down = n
	client.Close()
	up.Close()
	wg.Wait()
	if capErr != nil {
		r.denied, r.reason = true, capReason(capErr)
	}
}

// target is the host and port a request asks for, or a Denial for one that names
// neither properly. CONNECT takes host:port; plain HTTP an absolute http URI.
func target(req *http.Request) (string, int, error) {
	var hostport string
	def := 0
	if req.Method == http.MethodConnect {
		hostport = req.RequestURI
	} else {
		if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
			return "", 0, &egress.Denial{Reason: egress.ReasonInvalidName, Detail: "want CONNECT host:port, or an absolute http:// URI"}
		}
		hostport, def = req.URL.Host, 80
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return "", 0, &egress.Denial{Reason: egress.ReasonInvalidName, Detail: "CONNECT wants host:port"}
		}
		host, p = hostport, strconv.Itoa(def)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return host, 0, &egress.Denial{Reason: egress.ReasonPortNotAllowed, Host: host, Detail: "not a port"}
	}
	return host, port, nil
}

func (c *Channel) deny(conn net.Conn, r *record, err error) {
	r.denied = true
	var d *egress.Denial
	if errors.As(err, &d) {
		r.reason = string(d.Reason)
		if d.Host != "" {
			r.host = d.Host
		}
	} else {
		r.reason = "refused"
	}
	writeStatus(conn, http.StatusForbidden, err.Error())
}

// writeStatus answers with code, text in the status line (which HTTP libraries put in
// their exception) and in the body. text is a Denial's or our own: quoted host, no
// line breaks.
func writeStatus(conn net.Conn, code int, text string) {
	line := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, text)
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, line, len(line)+1, line)
}

// nameHash is a short keyed hash of a canonical name, for the log: equal names get
// equal hashes within one Server's life, and without the key a guess cannot be checked.
func (s *Server) nameHash(name string) string {
	m := hmac.New(sha256.New, s.hashKey)
	m.Write([]byte(name))
	return hex.EncodeToString(m.Sum(nil)[:6])
}

// dialVetted connects to the first vetted address that answers. The addresses come
// from Resolve; nothing here looks a name up.
func (s *Server) dialVetted(ctx context.Context, addrs []netip.AddrPort) (net.Conn, error) {
	var errs []error
	for _, a := range addrs {
		conn, err := s.dial(ctx, a)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// dialAddr connects to one address: an address, so no lookup.
func dialAddr(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	return d.DialContext(ctx, "tcp", a.String())
}

func isCap(err error) bool {
	var d *egress.Denial
	return errors.As(err, &d) && (d.Reason == egress.ReasonByteLimit || d.Reason == egress.ReasonConnectionLimit)
}

func capReason(err error) string {
	var d *egress.Denial
	if errors.As(err, &d) {
		return string(d.Reason)
	}
	return ""
}

// countedCopy copies src to dst, each chunk granted by the Counter first; it returns
// the Counter's Denial once the byte cap is reached.
func countedCopy(dst io.Writer, src io.Reader, c *egress.Counter) (int64, error) {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			grant, capErr := c.Take(int64(n))
			if grant > 0 {
				w, werr := dst.Write(buf[:grant])
				total += int64(w)
				if werr != nil {
					return total, werr
				}
			}
			if capErr != nil {
				return total, capErr
			}
		}
		if rerr != nil {
			if rerr == io.EOF {
				return total, nil
			}
			return total, rerr
		}
	}
}

// countWriter counts what it writes against the Counter.
type countWriter struct {
	w io.Writer
	c *egress.Counter
	n int64
}

func (cw *countWriter) Write(p []byte) (int, error) {
	grant, capErr := cw.c.Take(int64(len(p)))
	n, err := cw.w.Write(p[:grant])
	cw.n += int64(n)
	if err != nil {
		return n, err
	}
	if capErr != nil {
		return n, capErr
	}
	return n, nil
}

// SetDial replaces how a vetted address is dialled, for tests on a machine whose only
// way out is a gateway at a refused address (they take a public stand-in to it).
func (s *Server) SetDial(f func(ctx context.Context, a netip.AddrPort) (net.Conn, error)) {
	s.dial = f
}
