package egresstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TLSServer is a real HTTPS server of the test's, with a CA of its own, that answers
// for Names (none of them public: the proxy reaches it through the stand-in resolver
// and dialler of Route). It records the headers of each request it gets and serves:
//
//	/headers        the request's headers as JSON (an echoing endpoint)
//	/redirect?to=U  302 to U
//	/bytes?n=N      N bytes
//	/stream         "first\n", sent at once, then "last\n" once Release is called
//	anything else   "ok <host> <path>"
type TLSServer struct {
	*httptest.Server
	CAPEM []byte         // the server's CA, for a trust store
	Pool  *x509.CertPool // the same, as a pool
	Names []string

	mu      sync.Mutex
	seen    []http.Header
	conns   int
	release chan struct{} // closed by Release
	once    sync.Once
}

// Release lets /stream's responses send their last line.
func (s *TLSServer) Release() { s.once.Do(func() { close(s.release) }) }

// NewTLSServer starts a TLSServer whose certificate names names.
func NewTLSServer(t testing.TB, names ...string) *TLSServer {
	t.Helper()
	caPEM, pool, cert := testPKI(t, names)
	s := &TLSServer{CAPEM: caPEM, Pool: pool, Names: names, release: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	t.Cleanup(s.Release) // before Close, which waits for the handlers
	return s
}

// Seen returns the headers of every request so far.
func (s *TLSServer) Seen() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.seen...)
}

// Conns returns how many connections the server has accepted.
func (s *TLSServer) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

func (s *TLSServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := r.Header.Clone()
	h.Set("Host", r.Host)
	s.seen = append(s.seen, h)
	s.mu.Unlock()
	switch r.URL.Path {
	case "/headers":
		_ = json.NewEncoder(w).Encode(h)
	case "/redirect":
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	case "/bytes":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		buf := make([]byte, 32<<10)
		for n > 0 {
			k := min(n, len(buf))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	case "/stream":
		_, _ = w.Write([]byte("first\n"))
		w.(http.Flusher).Flush()
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("last\n"))
	default:
		_, _ = w.Write([]byte("ok " + r.Host + " " + r.URL.Path + "\n"))
	}
}

// Resolver answers the stand-in address for every name (Route).
type Resolver struct{}

func (Resolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{StandIn}, nil
}

// Dial takes the stand-in, on any port, to the local server at addr: the proxy
// checks and vets the stand-in as it would a public address, and only the last hop
// is the test's.
func Dial(addr string) func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
	return func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
		d := net.Dialer{Timeout: 10 * time.Second}
		if a.Addr() == StandIn {
			return d.DialContext(ctx, "tcp", addr)
		}
		return d.DialContext(ctx, "tcp", a.String())
	}
}

// testPKI makes a CA and a server certificate for names signed by it.
func testPKI(t testing.TB, names []string) ([]byte, *x509.CertPool, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egresstest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool,
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
