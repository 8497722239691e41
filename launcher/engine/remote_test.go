package engine

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// noDiscovery finds no local socket: the address comes from the parameters only.
var noDiscovery = discovery{
	getenv:       func(string) string { return "" },
	exists:       func(string) bool { return false },
	dockerSocket: "/nonexistent/docker.sock",
	podmanSocket: "/nonexistent/podman.sock",
}

// wantedErr checks err against want, a part of the error wanted ("": none), and
// reports whether an error was wanted, which ends the case.
func wantedErr(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to contain %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

func TestPlanConnTCP(t *testing.T) {
	certs := writeTLSFiles(t, newTestCA(t), true)
	caOnly := t.TempDir()
	copyFile(t, filepath.Join(certs, "ca.pem"), filepath.Join(caOnly, "ca.pem"))

	tests := []struct {
		name         string
		host         string
		env          map[string]string
		wantHost     string
		wantTLS      bool
		wantVerify   bool
		wantCert     bool
		wantInsecure string // substring; "" means none
		wantErr      string
	}{
		{name: "loopback plain, default port", host: "tcp://127.0.0.1", wantHost: "tcp://127.0.0.1:2375"},
		{name: "empty host is localhost", host: "tcp://:2375", wantHost: "tcp://localhost:2375"},
		{name: "ipv6 loopback", host: "tcp://[::1]:2375", wantHost: "tcp://[::1]:2375"},
		{name: "remote plain is insecure", host: "tcp://engine.example:2375", wantHost: "tcp://engine.example:2375", wantInsecure: "plain TCP"},
		{name: "remote plain with a cert path only: TLS stays off, like the CLI",
			host: "tcp://10.0.0.5", env: map[string]string{"DOCKER_CERT_PATH": certs},
			wantHost: "tcp://10.0.0.5:2375", wantInsecure: "DOCKER_TLS_VERIFY=1"},
		{name: "verify: default port 2376, client certificate",
			host: "tcp://engine.example", env: map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": certs},
			wantHost: "tcp://engine.example:2376", wantTLS: true, wantVerify: true, wantCert: true},
		{name: "verify with any non-empty value, even 0, like the CLI",
			host: "tcp://engine.example:2376", env: map[string]string{"DOCKER_TLS_VERIFY": "0", "DOCKER_CERT_PATH": certs},
			wantHost: "tcp://engine.example:2376", wantTLS: true, wantVerify: true, wantCert: true},
		{name: "verify without client certificate files",
			host: "tcp://engine.example:2376", env: map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": caOnly},
			wantHost: "tcp://engine.example:2376", wantTLS: true, wantVerify: true},
		{name: "cert path defaults to DOCKER_CONFIG",
			host: "tcp://engine.example:2376", env: map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CONFIG": certs},
			wantHost: "tcp://engine.example:2376", wantTLS: true, wantVerify: true, wantCert: true},
		{name: "verify without ca.pem fails",
			host: "tcp://engine.example:2376", env: map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": t.TempDir()},
			wantErr: "could not read CA certificate"},
		{name: "DOCKER_TLS without verification is insecure off this machine",
			host: "tcp://engine.example:2376", env: map[string]string{"DOCKER_TLS": "1", "DOCKER_CERT_PATH": certs},
			wantHost: "tcp://engine.example:2376", wantTLS: true, wantCert: true, wantInsecure: "without verifying"},
		{name: "DOCKER_TLS without verification on loopback",
			host: "tcp://localhost:2376", env: map[string]string{"DOCKER_TLS": "1", "DOCKER_CERT_PATH": certs},
			wantHost: "tcp://localhost:2376", wantTLS: true, wantCert: true},
		{name: "path kept", host: "tcp://127.0.0.1:2375/prefix", wantHost: "tcp://127.0.0.1:2375/prefix"},
		{name: "user refused", host: "tcp://me@127.0.0.1:2375", wantErr: "no user"},
		{name: "DOCKER_HOST used when no host is given", env: map[string]string{"DOCKER_HOST": "tcp://127.0.0.1:1234"}, wantHost: "tcp://127.0.0.1:1234"},
		{name: "unknown scheme", host: "http://127.0.0.1:2375", wantErr: "not supported"},
		{name: "no scheme", host: "127.0.0.1:2375", wantErr: "want unix://"},
		{name: "unix", host: "unix:///run/x.sock", wantHost: "unix:///run/x.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planConn(tt.host, envMap(tt.env), noDiscovery)
			if wantedErr(t, err, tt.wantErr) {
				return
			}
			if p.host != tt.wantHost {
				t.Errorf("host = %q, want %q", p.host, tt.wantHost)
			}
			var cfg *tls.Config
			if p.http != nil {
				cfg = p.http.Transport.(*http.Transport).TLSClientConfig
			}
			if (cfg != nil) != tt.wantTLS {
				t.Fatalf("TLS = %v, want %v", cfg != nil, tt.wantTLS)
			}
			if cfg != nil {
				if cfg.InsecureSkipVerify == tt.wantVerify {
					t.Errorf("InsecureSkipVerify = %v, want %v", cfg.InsecureSkipVerify, !tt.wantVerify)
				}
				if tt.wantVerify && cfg.RootCAs == nil {
					t.Error("verifying without a root pool of ca.pem")
				}
				if got := len(cfg.Certificates) > 0; got != tt.wantCert {
					t.Errorf("client certificate = %v, want %v", got, tt.wantCert)
				}
				if cfg.MinVersion < tls.VersionTLS12 {
					t.Errorf("MinVersion = %x, want at least TLS 1.2", cfg.MinVersion)
				}
			}
			if tt.wantInsecure == "" && p.insecure != "" || !strings.Contains(p.insecure, tt.wantInsecure) {
				t.Errorf("insecure = %q, want %q", p.insecure, tt.wantInsecure)
			}
		})
	}
}

func TestNewClientRefusesInsecureRemote(t *testing.T) {
	_, err := newClient("tcp://192.0.2.10:2375", ConnOptions{}, envMap(nil), noDiscovery)
	if err == nil || !strings.Contains(err.Error(), "refusing plain TCP") || !strings.Contains(err.Error(), "--allow-insecure-engine") {
		t.Fatalf("err = %v, want a refusal naming the override", err)
	}
	var warned []string
	cli, err := newClient("tcp://192.0.2.10:2375", ConnOptions{AllowInsecure: true, Warn: func(m string) { warned = append(warned, m) }}, envMap(nil), noDiscovery)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if len(warned) != 1 || !strings.Contains(warned[0], "UNSAFE") || !strings.Contains(warned[0], "tcp://192.0.2.10:2375") {
		t.Errorf("warnings = %q, want one UNSAFE warning naming the host", warned)
	}
	if got := cli.DaemonHost(); got != "tcp://192.0.2.10:2375" {
		t.Errorf("DaemonHost = %q", got)
	}
	// Loopback and verified TLS need no override.
	for _, c := range []struct {
		host string
		env  map[string]string
	}{
		{"tcp://127.0.0.1:2375", nil},
		{"tcp://engine.example:2376", map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": writeTLSFiles(t, newTestCA(t), true)}},
	} {
		cli, err := newClient(c.host, ConnOptions{Warn: func(m string) { t.Errorf("unexpected warning %q", m) }}, envMap(c.env), noDiscovery)
		if err != nil {
			t.Fatalf("%s: %v", c.host, err)
		}
		cli.Close()
	}
}

func TestParseSSH(t *testing.T) {
	tests := []struct {
		addr     string
		want     []string // ssh's arguments
		wantHost string   // DaemonHost
		wantErr  string
	}{
		{addr: "ssh://engine.example",
			want:     []string{"-o", "ConnectTimeout=30", "-o", "BatchMode=yes", "-T", "--", "engine.example", "docker", "system", "dial-stdio"},
			wantHost: "ssh://engine.example"},
		{addr: "ssh://ci@engine.example:2222",
			want:     []string{"-o", "ConnectTimeout=30", "-o", "BatchMode=yes", "-T", "-l", "ci", "-p", "2222", "--", "engine.example", "docker", "system", "dial-stdio"},
			wantHost: "ssh://engine.example:2222"},
		{addr: "ssh://ci@engine.example/run/podman/podman.sock",
			want:     []string{"-o", "ConnectTimeout=30", "-o", "BatchMode=yes", "-T", "-l", "ci", "--", "engine.example", "docker", "--host", "unix:///run/podman/podman.sock", "system", "dial-stdio"},
			wantHost: "ssh://engine.example"},
		{addr: "ssh://[::1]:22",
			want:     []string{"-o", "ConnectTimeout=30", "-o", "BatchMode=yes", "-T", "-p", "22", "--", "::1", "docker", "system", "dial-stdio"},
			wantHost: "ssh://[::1]:22"},
		{addr: "ssh://ci:secret@engine.example", wantErr: "password"},
		{addr: "ssh://", wantErr: "no host"},
		{addr: "ssh://engine.example?x=1", wantErr: "query"},
		{addr: "ssh://-oProxyCommand=x", wantErr: "start with '-'"},
		{addr: "ssh://engine.example/run/x;reboot", wantErr: "socket path"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			s, err := parseSSH(tt.addr)
			if wantedErr(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(tt.want, s.args()); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if got := s.clientHost(); got != tt.wantHost {
				t.Errorf("clientHost = %q, want %q", got, tt.wantHost)
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 8}
	b.Write([]byte("0123"))
	b.Write([]byte("456789ab"))
	if got := b.String(); got != "456789ab" {
		t.Errorf("got %q", got)
	}
}

// fakeSSH puts an `ssh` in PATH that records its arguments in argsFile and runs
// script instead of connecting anywhere.
func fakeSSH(t *testing.T, script string) (argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	body := "#!/bin/sh\nprintf '%s\\n' \"$*\" >>" + strconv.Quote(argsFile) + "\n" + script + "\n"
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return argsFile
}

// assertNoSSHChildren checks that every ssh process the client started has ended.
func assertNoSSHChildren(t *testing.T) {
	t.Helper()
	var left []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = sshChildren()
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("ssh processes %v are still running after Close", left)
	}
}

// sshChildren lists this process's children that are ssh, or the fake one's docker.
func sshChildren() []int {
	return append(childrenNamed(os.Getpid(), "ssh"), childrenNamed(os.Getpid(), "docker")...)
}

// childrenNamed lists the child processes of ppid whose command name is name.
func childrenNamed(ppid int, name string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) > 1 && s[open+1:end] == name && fields[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB) testCA {
	t.Helper()
	tmpl := certTemplate("mcp-exec rogue test CA")
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, key := createCert(t, tmpl, nil, nil)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a PEM certificate and key signed by the CA, for a client or for a
// server at 127.0.0.1.
func (ca testCA) issue(t testing.TB, client bool) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := certTemplate("mcp-exec test")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, key := createCert(t, tmpl, ca.cert, ca.key)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// certTemplate is a certificate for name, valid from an hour ago for a day.
func certTemplate(name string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

// createCert makes a new key and a certificate (DER) for it from tmpl, signed by
// parent and parentKey, or by itself when parent is nil.
func createCert(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// writeTLSFiles writes a DOCKER_CERT_PATH directory: the CA as ca.pem and, when
// withClient, a client certificate the CA signed as cert.pem and key.pem.
func writeTLSFiles(t testing.TB, ca testCA, withClient bool) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{"ca.pem": ca.pem}
	if withClient {
		files["cert.pem"], files["key.pem"] = ca.issue(t, true)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
