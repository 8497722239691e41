package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
)

// BundleName is the name, in the directory of a Channel whose profile has inject
// rules, of the CA bundle its sandbox trusts: the system's trust store and the
// proxy's CA, certificates only.
const BundleName = backend.EgressBundle

const (
	handshakeTimeout = 10 * time.Second
	idleTimeout      = 60 * time.Second // between requests on a kept-alive connection
)

// SetUpstreamRoots replaces the trust store the proxy verifies an injected host's
// real certificate against (nil: the system's). An operator's internal CA, or a
// test's.
func (s *Server) SetUpstreamRoots(roots *x509.CertPool) { s.upstreamRoots = roots }

// CABundle returns the name, in Dir, of the CA bundle the sandbox is to trust, or ""
// when its profile has no inject rules (then nothing is intercepted and the sandbox
// trusts only its image's roots). The launcher points SSL_CERT_FILE and its kin at it.
// A Channel without a directory names it all the same: its backend writes the bundle
// (CABundlePEM) at that name in the sandbox's EgressMount.
func (c *Channel) CABundle() string {
	if c.bundle {
		return BundleName
	}
	return ""
}

// CABundlePEM returns the CA bundle itself when the profile has inject rules, else
// nil: certificates only, the same bytes for every such Channel of the Server.
func (c *Channel) CABundlePEM() []byte {
	if c.bundle {
		return c.s.bundle
	}
	return nil
}

// initInject makes the CA when some profile has inject rules, and the bundle that
// sandboxes of those profiles trust.
func (s *Server) initInject() error {
	hosts := s.profiles.InjectHosts()
	if len(hosts) == 0 {
		return nil
	}
	ca, err := newAuthority(hosts)
	if err != nil {
		return fmt.Errorf("making the egress injection CA: %w", err)
	}
	sys, err := systemBundle()
	if err != nil {
		// Python's ssl still finds the image's roots in its hashed directory
		// (SSL_CERT_DIR is left alone); requests and pip would not.
		s.log.Warn().Err(err).Msg("egress inject: the sandboxes' CA bundle holds only the proxy's CA")
	}
	if len(sys) > 0 && sys[len(sys)-1] != '\n' {
		sys = append(sys, '\n')
	}
	s.ca, s.bundle = ca, append(sys, ca.pem...)
	s.sessions = tls.NewLRUClientSessionCache(256)
	return nil
}

// writeBundle puts the CA bundle in a Channel's directory, readable by the sandbox's
// user (the directory lets it search, not list).
func (s *Server) writeBundle(dir string) error {
	path := filepath.Join(dir, BundleName)
	if err := os.WriteFile(path, s.bundle, 0o644); err != nil {
		return err
	}
	return os.Chmod(path, 0o644) // whatever the umask
}

// intercept serves a CONNECT to a host with inject rules: it takes a connection to the
// real host that the Channel kept, or opens its own TLS to it first (verified against
// upstreamRoots or the system's: a mismatch is a 502 to the CONNECT, before the
// program's TLS), then terminates the program's TLS
// with a leaf for the host and relays HTTP/1.1 requests one by one, each with the
// rule's headers set, until either side ends. Redirects reach the program like any
// response: it follows them itself, and a request to another host is another
// CONNECT, without the headers.
func (c *Channel) intercept(conn net.Conn, br *bufio.Reader, addrs []netip.AddrPort, host string, port int, hs []egress.Header, r *record) {
	r.intercepted = true
	key := net.JoinHostPort(host, strconv.Itoa(port))
	up := c.takeIdle(key)
	if up == nil {
		var msg string
		if up, msg = c.dialUpstream(addrs, host, port, r); up == nil {
			writeStatus(conn, http.StatusBadGateway, msg)
			return
		}
	}
	// Whatever still holds up here is clean: unused, or between two exchanges.
	defer func() {
		if up != nil {
			c.putIdle(key, up)
		}
	}()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	leaf, err := c.s.ca.leaf(host)
	if err != nil {
		r.failed, r.reason = true, "leaf_failed"
		return
	}
	// Only HTTP/1.1 is offered: the proxy reads each request to set its headers, and
	// a client that wants h2 falls back to it.
	client := tls.Server(&prefixConn{Conn: conn, r: io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn)},
		&tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	hctx, cancel := context.WithTimeout(c.ctx, handshakeTimeout)
	err = client.HandshakeContext(hctx)
	cancel()
	if err != nil {
		r.failed, r.reason = true, "client_tls"
		return
	}
	c.relayRequests(client, &up, key, addrs, host, port, hs, r)
}

// upstream is the proxy's TLS connection to a real host, with its reader.
type upstream struct {
	conn      *tls.Conn
	raw       net.Conn
	br        *bufio.Reader
	idleSince time.Time
}

// dialUpstream connects to a vetted address and verifies the real host's TLS; on
// failure it returns nil and the text of the 502 to answer (the CONNECT's, or the
// request's inside the program's TLS).
func (c *Channel) dialUpstream(addrs []netip.AddrPort, host string, port int, r *record) (*upstream, string) {
	raw, err := c.s.dialVetted(c.ctx, addrs)
	if err != nil {
		r.failed, r.reason = true, "dial_failed"
		return nil, fmt.Sprintf("egress: could not connect to %q port %d", host, port)
	}
	if !c.track(raw) {
		return nil, "egress: the channel is closed"
	}
	// Sessions are resumed across connections: the real host's handshake is the
	// larger part of what interception adds to a new connection's first byte.
	up := tls.Client(raw, &tls.Config{ServerName: host, RootCAs: c.s.upstreamRoots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
		ClientSessionCache: c.s.sessions})
	hctx, cancel := context.WithTimeout(c.ctx, handshakeTimeout)
	err = up.HandshakeContext(hctx)
	cancel()
	if err != nil {
		c.drop(raw)
		r.failed, r.reason = true, "upstream_tls"
		c.s.log.Warn().Str("profile", c.p.Name()).Str("host", host).Int("port", port).Err(err).Msg("egress inject: the real host's TLS was refused")
		return nil, fmt.Sprintf("egress: %q port %d: its certificate was refused (the proxy verifies the real host before it sets a credential)", host, port)
	}
	return &upstream{conn: up, raw: raw, br: bufio.NewReader(up)}, ""
}

// idleKeep is how long a Channel keeps a verified connection to a real host that
// the program's connection left clean, for the program's next connection to the
// same host (urllib opens one per request): below the shortest keep-alive timeouts
// servers use (Node's 5 s), so that the server has rarely closed it.
const idleKeep = 4 * time.Second

// maxIdle bounds the idle connections a Channel keeps per host and port.
const maxIdle = 4

// takeIdle returns one of the Channel's idle connections to key, the most recent that
// is young and that the server has not closed (nor sent anything unasked on); nil
// when there is none. Connections are never shared between Channels: a sandbox's
// requests never travel on another's.
func (c *Channel) takeIdle(key string) *upstream {
	for {
		c.mu.Lock()
		list := c.idle[key]
		if len(list) == 0 {
			c.mu.Unlock()
			return nil
		}
		up := list[len(list)-1]
		c.idle[key] = list[:len(list)-1]
		c.mu.Unlock()
		if time.Since(up.idleSince) > idleKeep {
			c.drop(up.raw)
			continue
		}
		if !quiet(up) {
			c.drop(up.raw) // closed by the server, or bytes nobody asked for
			continue
		}
		return up
	}
}

// quiet reports whether the server has neither closed up nor sent anything on it
// since its last exchange, without waiting (a wait here is the program's, before its
// CONNECT is answered): the socket is peeked at without blocking, then what TLS holds
// is read with a deadline already past. A connection that is no socket (a test's) is
// read for a millisecond instead.
func quiet(up *upstream) bool {
	if up.br.Buffered() > 0 {
		return false
	}
	wait := time.Millisecond
	if sc, ok := up.raw.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			var pending bool
			err = rc.Read(func(fd uintptr) bool {
				var b [1]byte
				_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
				pending = !errors.Is(err, unix.EAGAIN) // bytes, an end, or an error
				return true
			})
			if err == nil {
				if pending {
					return false
				}
				wait = 0
			}
		}
	}
	_ = up.conn.SetReadDeadline(time.Now().Add(wait))
	_, err := up.br.Peek(1)
	_ = up.conn.SetReadDeadline(time.Time{})
	return isTimeout(err)
}

// putIdle keeps up, clean between two exchanges, for the Channel's next request to
// key, closing the oldest kept past maxIdle; a closed Channel closes it.
func (c *Channel) putIdle(key string, up *upstream) {
	up.idleSince = time.Now()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.drop(up.raw)
		return
	}
	if c.idle == nil {
		c.idle = map[string][]*upstream{}
	}
	list := append(c.idle[key], up)
	var old *upstream
	if len(list) > maxIdle {
		old, list = list[0], list[1:]
	}
	c.idle[key] = list
	c.mu.Unlock()
	if old != nil {
		c.drop(old.raw)
	}
}

// relayRequests forwards the program's requests on client, one at a time, with the
// headers hs set, and streams each response back. Each request goes on a clean
// connection to the real host: *held (the one verified for the CONNECT), else one
// the Channel kept, else a new one verified as the first was. After a complete
// exchange kept alive, the connection goes back to the Channel (putIdle): urllib
// opens a connection per request, and the next one finds it.
func (c *Channel) relayRequests(client *tls.Conn, held **upstream, key string, addrs []netip.AddrPort, host string, port int, hs []egress.Header, r *record) {
	hr := &headReader{r: client}
	cbr := bufio.NewReader(hr)
	bw := writers.Get().(*bufio.Writer)
	defer func() { bw.Reset(nil); writers.Put(bw) }()
	authority := host
	if port != 443 {
		authority = net.JoinHostPort(host, strconv.Itoa(port))
	}
	for {
		_ = client.SetReadDeadline(time.Now().Add(idleTimeout))
		hr.left, hr.on = maxHead, true
		req, err := http.ReadRequest(cbr)
		hr.on = false
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
				writeStatus(client, http.StatusBadRequest, "egress: could not read the request head")
			}
			return
		}
		_ = client.SetReadDeadline(time.Time{})
		rr := &requestRecord{method: req.Method, path: req.URL.Path, began: time.Now()}
		up := *held
		*held = nil
		if up == nil {
			up = c.takeIdle(key)
		}
		if up == nil {
			var msg string
			if up, msg = c.dialUpstream(addrs, host, port, r); up == nil {
				rr.decision, rr.reason, rr.status = "failed", r.reason, http.StatusBadGateway
				c.s.auditRequest(c, host, port, rr, hs)
				writeStatus(client, http.StatusBadGateway, msg)
				return
			}
		}
		clean, more := c.relayOne(client, up.conn, up.br, bw, req, authority, hs, rr, r)
		c.s.auditRequest(c, host, port, rr, hs)
		if clean {
			c.putIdle(key, up)
		} else {
			c.drop(up.raw)
		}
		if !more {
			return
		}
	}
}

// requestRecord is what one injected request's audit line says.
type requestRecord struct {
	method, path string
	status       int
	up, down     int64
	began        time.Time
	decision     string
	reason       string
}

// relayOne forwards one request and its response. It reports whether the connection
// to the host is clean for another exchange, and whether the program's connection
// may carry another request. Connection is hop-by-hop: the program's (urllib always
// sends "close") ends its own connection after this response, and the proxy's to the
// host stays open unless the host closes it.
func (c *Channel) relayOne(client, up net.Conn, ubr *bufio.Reader, bw *bufio.Writer, req *http.Request, authority string, hs []egress.Header, rr *requestRecord, r *record) (upClean, more bool) {
	rr.decision = "allowed"
	if req.Header.Get("Upgrade") != "" || req.Method == http.MethodConnect {
		// A websocket (or any upgrade) would leave HTTP, where the proxy can no
		// longer tell requests apart; refused rather than carried half-checked.
		rr.decision, rr.reason, rr.status = "denied", "upgrade_refused", http.StatusNotImplemented
		writeStatus(client, http.StatusNotImplemented, "egress: protocol upgrades (websockets) are not carried to a host with inject rules")
		return true, false
	}
	if req.Method == "TRACE" || req.Method == "TRACK" {
		// TRACE answers with the request as the host got it, the set headers in it.
		rr.decision, rr.reason, rr.status = "denied", "trace_refused", http.StatusMethodNotAllowed
		writeStatus(client, http.StatusMethodNotAllowed, "egress: TRACE is not carried to a host with inject rules (it would echo the credential)")
		return true, false
	}
	// The site is the host the rule is for: another Host would take the credential
	// to another site served from the same address.
	req.Host = authority
	progClose := req.Close
	req.Close = false
	for _, v := range req.Header["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				req.Header.Del(name)
			}
		}
	}
	for k := range req.Header {
		if l := strings.ToLower(k); strings.HasPrefix(l, "proxy-") || l == "connection" || l == "keep-alive" {
			req.Header.Del(k)
		}
	}
	for _, h := range hs {
		req.Header.Set(h.Name, h.Value())
	}
	req.RequestURI = ""
	cw := &countWriter{w: up, c: c.counter}
	werr := req.Write(cw)
	rr.up = cw.n
	r.up += cw.n
	if werr != nil {
		c.noteCap(werr, rr, r)
		return false, false
	}
	for {
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			rr.decision, rr.reason, rr.status = "failed", "bad_response", http.StatusBadGateway
			writeStatus(client, http.StatusBadGateway, "egress: the host's response could not be read")
			return false, false
		}
		rr.status = resp.StatusCode
		upClose := resp.Close
		resp.Close = upClose || progClose // the program's connection ends with it
		cw := &countWriter{w: client, c: c.counter}
		// Response.Write writes the head in pieces (four per header line), each of
		// which would be a TLS record and a write of its own to the program; buffered,
		// the head is one, sent before the body's first read, which may wait.
		bw.Reset(cw)
		body := resp.Body
		resp.Body = flushingBody{ReadCloser: body, w: bw}
		// Write only: bufio.Writer's ReadFrom reads into its buffer, which the body's
		// flush would empty under it.
		werr := resp.Write(struct{ io.Writer }{bw})
		if werr == nil {
			werr = bw.Flush()
		}
		body.Close()
		rr.down += cw.n
		r.down += cw.n
		if werr != nil {
			c.noteCap(werr, rr, r)
			return false, false
		}
		// An interim response (100 Continue) is followed by the final one.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return false, false
		}
		return !upClose, !resp.Close
	}
}

// writers are the buffers of what goes to the program, one per program connection
// while it lasts (urllib opens one per request): as large as the most plaintext one
// TLS record carries, so that each flush is at most one record.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 16<<10) }}

// flushingBody is a response body that sends what w holds before each read of the
// host's response: a head or a chunk never waits in the buffer for the host's next
// bytes (a stream, a long poll), and each body read is one write, as unbuffered.
type flushingBody struct {
	io.ReadCloser
	w *bufio.Writer
}

func (b flushingBody) Read(p []byte) (int, error) {
	if b.w.Buffered() > 0 {
		if err := b.w.Flush(); err != nil {
			return 0, err
		}
	}
	return b.ReadCloser.Read(p)
}

func (c *Channel) noteCap(err error, rr *requestRecord, r *record) {
	if isCap(err) {
		rr.decision, rr.reason = "denied", capReason(err)
		r.denied, r.reason = true, capReason(err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// prefixConn is a connection whose first bytes come from r (what the proxy had
// already buffered after the CONNECT head).
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (p *prefixConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// track registers an upstream connection for Close; false once the Channel is closed.
func (c *Channel) track(up net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		up.Close()
		return false
	}
	c.conns[up] = struct{}{}
	return true
}
