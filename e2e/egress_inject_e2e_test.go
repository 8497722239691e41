package e2e_test

import (
	"bufio"
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// TestEgressInjectE2E runs the binary with an inject rule whose value comes from its
// environment, and --egress-audit: a call with the profile gets the CA bundle and the
// variables that point at it, the audit file gets its line, and the secret is in no
// output, log or audit line. Whether the request itself gets through depends on this
// machine's DNS (here every public name resolves to a gateway at a refused address, so
// the proxy refuses it); TestEgressInjectClientE2E shows the injection through the
// binary against a server of its own.
func TestEgressInjectE2E(t *testing.T) {
	if runtime := os.Getenv("MCP_EXEC_TEST_RUNTIME"); !launchertest.HostUDS(t, runtime) {
		t.Skipf("runtime %q does not let the channel through (TestEgressE2E checks the refusal)", runtime)
	}
	bin := e2e.Build(t)
	dir := t.TempDir()
	profiles := filepath.Join(dir, "egress.json")
	if err := os.WriteFile(profiles, []byte(`{"profiles": {"deb": {"hosts": ["deb.debian.org"],
	  "inject": {"deb.debian.org": {"headers": {"Authorization": "Bearer ${env:E2E_INJECT_TOKEN}"}}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := "SECRET-" + e2e.Random()
	audit := filepath.Join(dir, "audit.jsonl")
	env := e2e.Env("MCP_EXEC_POOL_SIZE=1", "MCP_EXEC_EGRESS_PROFILES="+profiles, "MCP_EXEC_EGRESS_DIR="+filepath.Join(dir, "s"),
		"MCP_EXEC_EGRESS_AUDIT="+audit, "E2E_INJECT_TOKEN="+secret)
	srv := e2e.Serve(t, bin, env, "http", "test-egress-inject-e2e", e2e.Random())
	cs := srv.Connect(t, nil, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"egress": "deb", "code": `
import os, urllib.request
b = os.environ.get("SSL_CERT_FILE")
print("bundle", b, os.environ.get("REQUESTS_CA_BUNDLE") == b, open(b).read().count("BEGIN CERTIFICATE") > 1, "PRIVATE" in open(b).read())
print("env", dict(os.environ))
try:
    with urllib.request.urlopen("https://deb.debian.org/debian/", timeout=20) as r:
        print("get", r.status)
except Exception as e:
    print("get", e)
`}})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Content[0].(*mcp.TextContent).Text
	if res.IsError || !strings.Contains(out, "bundle /egress/ca-bundle.pem True True False") {
		t.Errorf("with an inject profile: %s", out)
	}
	a, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("audit: %s", a)
	logs := srv.Logs.String()
	if !strings.Contains(string(a), `"event":"connection","profile":"deb"`) || !strings.Contains(string(a), `"host":"deb.debian.org"`) {
		t.Errorf("audit file lacks the connection:\n%s", a)
	}
	if !strings.Contains(logs, `"inject_hosts":["deb.debian.org"]`) {
		t.Errorf("server log lacks the injected hosts at start:\n%s", logs)
	}
	for what, s := range map[string]string{"output": out, "log": logs, "audit": string(a)} {
		if strings.Contains(s, secret) {
			t.Errorf("the secret is in the %s", what)
		}
	}
}

// The addresses of TestEgressInjectClientE2E's private networks: upstreamAddr is the
// real hosts' (public-looking, in none of the ranges egress.Vet refuses), serverSide
// the server's end of the link (its own address: the proxy never dials it).
const (
	upstreamAddr = "45.45.45.45"
	serverSide   = "10.45.0.1"
)

// TestEgressInjectClientE2E is inject rules end to end with the TypeScript SDK client
// (scripts/e2e/inject.mjs) through the binary over stdio: a program using requests and
// one using urllib fetch an injected host and a host of the same profile without a rule.
// The real hosts are a TLS server of the test's, with a CA of its own that the server
// trusts through --egress-inject-ca: it records that the injected host got the rule's
// Authorization in place of the program's and the other host the program's own; the
// programs see the proxy CA's certificate for the first and the real server's for the
// second; the secret is in no output, log or audit line, and the audit has the lines.
//
// A local server, because this workplace's DNS answers public names with addresses of
// the documentation ranges (a re-signing gateway) that the proxy refuses, as it refuses
// loopback and private ones. So the client and the binary run in a network and mount
// namespace of their own, where a bind-mounted /etc/hosts (which the proxy's lookup,
// Go's resolver, reads first) names the two hosts with upstreamAddr, routed over a veth
// link to a second network namespace where the test's server listens on it: the proxy's
// checks all apply unchanged, upstreamAddr is not among its own addresses, and the
// binary has no hook. The engine is reached over its unix socket, which a network
// namespace does not cut, as are the channels' sockets (the filesystem is shared).
// Needs root (unshare), veth, and the sandbox image with python3-requests.
func TestEgressInjectClientE2E(t *testing.T) {
	if runtime := os.Getenv("MCP_EXEC_TEST_RUNTIME"); !launchertest.HostUDS(t, runtime) {
		t.Skipf("runtime %q does not let the channel through (TestEgressE2E checks the refusal)", runtime)
	}
	if os.Geteuid() != 0 {
		e2e.SkipOrFail(t, "needs root for its network and mount namespaces (unshare, nsenter)")
	}
	dir, node := e2e.Node(t)
	bin := e2e.Build(t)
	tmp := t.TempDir()

	// The real hosts' CA and server, in the upstream namespace.
	caPEM, cert := upstreamCert(t, "api.mcp-exec-e2e.net", "files.mcp-exec-e2e.net")
	caFile := filepath.Join(tmp, "upstream-ca.pem")
	hostsFile := filepath.Join(tmp, "hosts")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hostsFile, []byte("127.0.0.1 localhost\n"+upstreamAddr+" api.mcp-exec-e2e.net files.mcp-exec-e2e.net\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := holdNamespace(t, "--net")
	client := holdNamespace(t, "--net", "--mount")
	setUpNamespaces(t, fmt.Sprintf(`set -e
nsenter --net=/proc/%[1]d/ns/net --mount=/proc/%[1]d/ns/mnt sh -ec '
  mount --bind %[3]s /etc/hosts
  ip link set lo up
  ip link add e2einj0 type veth peer name e2einj1
  ip link set e2einj1 netns %[2]d
  ip addr add %[4]s/32 dev e2einj0
  ip link set e2einj0 up
  ip route add %[5]s/32 dev e2einj0'
nsenter --net=/proc/%[2]d/ns/net sh -ec '
  ip link set lo up
  ip addr add %[5]s/32 dev e2einj1
  ip link set e2einj1 up
  ip route add %[4]s/32 dev e2einj1'`, client, up, hostsFile, serverSide, upstreamAddr))

	type got struct{ host, path, auth, agent string }
	var mu sync.Mutex
	var reqs []got
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			reqs = append(reqs, got{r.Host, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("User-Agent")})
			mu.Unlock()
			fmt.Fprintf(w, "hello from %s", r.Host)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	ln := listenIn(t, up, net.JoinHostPort(upstreamAddr, "443"))
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })

	profiles := filepath.Join(tmp, "egress.json")
	if err := os.WriteFile(profiles, []byte(`{"profiles": {"e2e": {"hosts": ["api.mcp-exec-e2e.net", "files.mcp-exec-e2e.net"],
	  "inject": {"api.mcp-exec-e2e.net": {"headers": {"Authorization": "Bearer ${env:E2E_INJECT_TOKEN}"}}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := "SECRET-" + e2e.Random()
	audit := filepath.Join(tmp, "audit.jsonl")
	instance := "e2e-inject-client-" + e2e.Random()[:8]
	env := e2e.Env("MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_SESSION_POOL_SIZE=0", "MCP_EXEC_INSTANCE="+instance,
		"MCP_EXEC_EGRESS_PROFILES="+profiles, "MCP_EXEC_EGRESS_DIR="+filepath.Join(tmp, "s"),
		"MCP_EXEC_EGRESS_INJECT_CA="+caFile, "MCP_EXEC_EGRESS_AUDIT="+audit, "E2E_INJECT_TOKEN="+secret)
	t.Cleanup(func() { e2e.AssertNoContainers(t, instance) })
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Fatal(err)
	}
	// The client in the client's namespaces: nsenter runs node with the script.
	r := e2e.RunScript(t, fmt.Sprintf("--net=/proc/%d/ns/net", client), nsenter, dir, env,
		fmt.Sprintf("--mount=/proc/%d/ns/mnt", client), "--wd="+dir, "--", node, "inject.mjs", "--transport", "stdio", "--cmd", bin, "--ca", caFile)
	if r.ExitCode != 0 {
		t.Logf("inject.mjs stderr:\n%s", r.Stderr)
	}
	e2e.ExpectPass(t, r)

	mu.Lock()
	defer mu.Unlock()
	for _, g := range reqs {
		auth := map[string]string{"Bearer " + secret: "the rule's", "Bearer program-own": "the program's"}[g.auth]
		t.Logf("the real host got: %s %s, %s, Authorization %s", g.host, g.path, g.agent, cmp.Or(auth, "other"))
	}
	for _, lib := range []string{"python-requests/", "Python-urllib/"} {
		var inj, tun int
		for _, g := range reqs {
			if !strings.HasPrefix(g.agent, lib) {
				continue
			}
			switch {
			case g.host == "api.mcp-exec-e2e.net" && g.path == "/whoami" && g.auth == "Bearer "+secret:
				inj++
			case g.host == "files.mcp-exec-e2e.net" && g.path == "/file" && g.auth == "Bearer program-own":
				tun++
			default:
				t.Errorf("%s: unexpected request to the real hosts: host %q path %q, Authorization the secret: %t, the program's: %t",
					lib, g.host, g.path, g.auth == "Bearer "+secret, g.auth == "Bearer program-own")
			}
		}
		if inj != 1 || tun != 1 {
			t.Errorf("%s: %d requests with the rule's Authorization to the injected host and %d with the program's to the other, want 1 and 1", lib, inj, tun)
		}
	}
	a, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("audit:\n%s", a)
	for _, want := range []string{
		`"event":"request","profile":"e2e"`,
		`"host":"api.mcp-exec-e2e.net","port":443,"method":"GET","path":"/whoami","intercepted":true,"injected":["Authorization"],"decision":"allowed","status":200`,
		`"host":"files.mcp-exec-e2e.net","port":443,"method":"CONNECT","decision":"allowed"`,
	} {
		if strings.Count(string(a), want) < 2 {
			t.Errorf("audit file has fewer than 2 lines with %s", want)
		}
	}
	for what, s := range map[string]string{"client's output (the programs' and the reports)": r.Stdout, "server log": r.Stderr, "audit": string(a)} {
		if strings.Contains(s, secret) || strings.Contains(s, secret[len("SECRET-"):]) {
			t.Errorf("the secret is in the %s", what)
		}
	}
}

// holdNamespace starts a process in new namespaces (unshare's flags) that holds them
// until the test ends, and returns its pid once they exist.
func holdNamespace(t *testing.T, flags ...string) int {
	t.Helper()
	cmd := exec.Command("unshare", append(flags, "sh", "-c", "echo ready; exec sleep 600")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e2e.SkipOrFail(t, "unshare %v: %v", flags, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		e2e.SkipOrFail(t, "unshare %v: %q, %v", flags, line, err)
	}
	return cmd.Process.Pid
}

func setUpNamespaces(t *testing.T, script string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		e2e.SkipOrFail(t, "setting up the namespaces: %v\n%s", err, out)
	}
}

// listenIn listens on addr in the network namespace of process pid: from a thread of
// its own, which setns moves there and which ends with its goroutine, still locked, so
// that no other goroutine runs in that namespace. The socket stays in it.
func listenIn(t *testing.T, pid int, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.ln
}

// upstreamCert makes a CA and a certificate it signs for names: the CA's PEM and the
// server's certificate.
func upstreamCert(t *testing.T, names ...string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcp-exec e2e upstream CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
