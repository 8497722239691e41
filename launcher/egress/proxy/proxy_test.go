package proxy

import (
	"bufio"
	"context"
	"encoding/json"
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
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// fakeResolver answers from a table and records every lookup.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	asked   []string
}

func (f *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, host)
	return f.answers[host], nil
}

func (f *fakeResolver) lookups() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// testServer is a proxy whose resolver is fake and whose dialler takes every vetted
// address to one local upstream, recording the addresses it was asked for.
type testServer struct {
	*Server
	res    *fakeResolver
	mu     sync.Mutex
	dialed []netip.AddrPort
	logs   syncbuf.Buffer
}

func (ts *testServer) Write(p []byte) (int, error) { return ts.logs.Write(p) }

func (ts *testServer) log() string { return ts.logs.String() }

func newTestServer(t *testing.T, profiles string, upstream string) *testServer {
	t.Helper()
	ps, err := egress.ParseProfiles([]byte(profiles))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{res: &fakeResolver{answers: map[string][]netip.Addr{
		"pub.example.org.":    {netip.MustParseAddr("93.184.215.14")},
		"rebind.example.org.": {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("127.0.0.1")},
		"meta.example.org.":   {netip.MustParseAddr("169.254.169.254")},
		"mapped.example.org.": {netip.MustParseAddr("::ffff:10.0.0.1")},
	}}}
	srv, err := New(ps, filepath.Join(t.TempDir(), "s"), "unit", owner.ID{}, zerolog.New(ts))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetResolver(ts.res)
	srv.dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
		ts.mu.Lock()
		ts.dialed = append(ts.dialed, a)
		ts.mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, "tcp", upstream)
	}
	ts.Server = srv
	return ts
}

// echoUpstream answers every connection with what it reads, prefixed "echo:".
func echoUpstream(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				line, _ := br.ReadString('\n')
				if strings.HasPrefix(line, "GET ") {
					for {
						h, err := br.ReadString('\n')
						if err != nil || h == "\r\n" {
							break
						}
						if strings.HasPrefix(h, "Host:") {
							line += h
						}
					}
				}
				io.WriteString(c, "echo:"+line)
			}()
		}
	}()
	return ln.Addr().String()
}

func ask(t *testing.T, ch *Channel, head, after string) (status string, rest string) {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(ch.Dir(), SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, head)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%q: %v", head, err)
	}
	if resp.StatusCode == 200 && after == "" {
		return resp.Status, ""
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.Status, string(b)
	}
	io.WriteString(c, after)
	b, _ := io.ReadAll(br)
	return resp.Status, string(b)
}

const unitProfiles = `{"profiles": {
  "p": {"hosts": ["pub.example.org", "rebind.example.org", "meta.example.org", "mapped.example.org", "*.wild.example.org"], "ports": [443]},
  "capped": {"hosts": ["pub.example.org"], "max_connections": 1, "max_bytes": 10}
}}`

func TestProxyDecisions(t *testing.T) {
	ts := newTestServer(t, unitProfiles, echoUpstream(t))
	ch, err := ts.OpenChannel("p")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	tests := []struct {
		name, head, status string
		lookup             bool // whether the name may be looked up
	}{
		{"allowed", "CONNECT pub.example.org:443 HTTP/1.1\r\n\r\n", "200 Connection established", true},
		{"other host", "CONNECT evil.example.net:443 HTTP/1.1\r\n\r\n", "403 egress denied (host_not_allowed)", false},
		{"suffix itself", "CONNECT wild.example.org:443 HTTP/1.1\r\n\r\n", "403 egress denied (host_not_allowed)", false},
		{"other port", "CONNECT pub.example.org:22 HTTP/1.1\r\n\r\n", "403 egress denied (port_not_allowed)", false},
		{"ip literal", "CONNECT 93.184.215.14:443 HTTP/1.1\r\n\r\n", "403 egress denied (ip_literal)", false},
		{"integer ip", "CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", "403 egress denied (ip_literal)", false},
		{"ipv6 literal", "CONNECT [::1]:443 HTTP/1.1\r\n\r\n", "403 egress denied (ip_literal)", false},
		{"localhost", "CONNECT localhost:443 HTTP/1.1\r\n\r\n", "403 egress denied (special_name)", false},
		{"no port", "CONNECT pub.example.org HTTP/1.1\r\n\r\n", "403 egress denied (invalid_name)", false},
		{"rebinding answer", "CONNECT rebind.example.org:443 HTTP/1.1\r\n\r\n", "403 egress denied (address_refused)", true},
		{"metadata", "CONNECT meta.example.org:443 HTTP/1.1\r\n\r\n", "403 egress denied (address_refused)", true},
		{"mapped private", "CONNECT mapped.example.org:443 HTTP/1.1\r\n\r\n", "403 egress denied (address_refused)", true},
		{"https absolute", "GET https://pub.example.org/ HTTP/1.1\r\nHost: pub.example.org\r\n\r\n", "403 egress denied (invalid_name)", false},
		{"origin form", "GET / HTTP/1.1\r\nHost: pub.example.org\r\n\r\n", "403 egress denied (invalid_name)", false},
		{"plain http port 80", "GET http://pub.example.org/x HTTP/1.1\r\nHost: pub.example.org\r\n\r\n", "403 egress denied (port_not_allowed)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(ts.res.lookups())
			status, body := ask(t, ch, tt.head, "")
			if !strings.HasPrefix(status, tt.status) {
				t.Errorf("status %q, want %q", status, tt.status)
			}
			if strings.HasPrefix(status, "403") && !strings.Contains(body, "egress denied") {
				t.Errorf("body %q lacks the reason", body)
			}
			if looked := len(ts.res.lookups()) > before; looked && !tt.lookup {
				t.Errorf("the name was looked up: %q", ts.res.lookups()[before:])
			}
		})
	}
	// Only vetted addresses were dialled, never a name and never a refused address.
	for _, a := range ts.dialed {
		if a != netip.MustParseAddrPort("93.184.215.14:443") {
			t.Errorf("dialled %s", a)
		}
	}
	if len(ts.dialed) != 1 {
		t.Errorf("dialled %d times, want 1", len(ts.dialed))
	}
}

func TestProxyRelaysAndPlainHTTP(t *testing.T) {
	ts := newTestServer(t, `{"profiles": {"p": {"hosts": ["pub.example.org"], "ports": [443, 80]}}}`, echoUpstream(t))
	ch, err := ts.OpenChannel("p")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if status, got := ask(t, ch, "CONNECT pub.example.org:443 HTTP/1.1\r\n\r\n", "hello\n"); status != "200 Connection established" || got != "echo:hello\n" {
		t.Errorf("CONNECT: %q %q", status, got)
	}
	// Plain HTTP is forwarded in origin form, without the proxy's headers.
	c, err := net.Dial("unix", filepath.Join(ch.Dir(), SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://pub.example.org/secret-path HTTP/1.1\r\nHost: other.example.net\r\nProxy-Authorization: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	// In origin form, with the checked name as Host (not the program's other one).
	if string(b) != "echo:GET /secret-path HTTP/1.1\r\nHost: pub.example.org\r\n" {
		t.Errorf("plain HTTP upstream saw %q", b)
	}
	logs := ts.log()
	if strings.Contains(logs, "secret-path") || strings.Contains(logs, "Proxy-Authorization") {
		t.Errorf("log holds request data: %s", logs)
	}
	if !strings.Contains(logs, `"host":"pub.example.org","host_redacted":false,"port":80,"decision":"allowed"`) {
		t.Errorf("log lacks the allowed line: %s", logs)
	}
}

func TestProxyCaps(t *testing.T) {
	ts := newTestServer(t, unitProfiles, echoUpstream(t))
	ch, err := ts.OpenChannel("capped")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, got := ask(t, ch, "CONNECT pub.example.org:443 HTTP/1.1\r\n\r\n", "0123456789abcdef\n")
	if got != "" && len(got) > 10 {
		t.Errorf("past max_bytes: got %q back", got)
	}
	if up, down := ch.Used(); up != 1 || down > 10 {
		t.Errorf("used: %d connections, %d bytes; want 1, at most 10", up, down)
	}
	if status, _ := ask(t, ch, "CONNECT pub.example.org:443 HTTP/1.1\r\n\r\n", ""); !strings.HasPrefix(status, "403 egress denied (connection_limit)") {
		t.Errorf("second connection: %q", status)
	}
}

func TestChannelClose(t *testing.T) {
	ts := newTestServer(t, unitProfiles, echoUpstream(t))
	if _, err := ts.OpenChannel("nope"); err == nil {
		t.Error("unknown profile: no error")
	}
	ch, err := ts.OpenChannel("p")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(ch.Dir(), SocketName))
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	held, err := net.Dial("unix", filepath.Join(ch.Dir(), SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ch.Dir()); !os.IsNotExist(err) {
		t.Errorf("directory left: %v", err)
	}
	held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil {
		t.Error("a connection outlived Close")
	}
}

// TestCheckChannel: the check channel answers each connection with its token and
// closes it, and Close removes its directory.
func TestCheckChannel(t *testing.T) {
	ts := newTestServer(t, unitProfiles, echoUpstream(t))
	ch, token, err := ts.OpenCheck(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dir := ch.Dir()
	if !strings.HasPrefix(filepath.Base(dir), DirPrefix("unit")) || len(token) < 32 {
		t.Errorf("dir %q, token %q", dir, token)
	}
	for range 2 {
		c, err := net.Dial("unix", filepath.Join(dir, SocketName))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != token+"\n" {
			t.Errorf("read %q, %v; want the token and a newline", b, err)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory left: %v", err)
	}
}

// TestStaleChannelsRemoved: a server that starts removes the channel directories an
// earlier run of its instance left (a SIGKILLed server cannot), and leaves alone
// those of another instance sharing the directory (live or not) and anything else.
func TestStaleChannelsRemoved(t *testing.T) {
	ps, err := egress.ParseProfiles([]byte(unitProfiles))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The other instance is live: its channel must keep working.
	other, err := New(ps, dir, "other", owner.ID{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	live, err := other.OpenChannel("p")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// The earlier run of "mine", killed: its directories and sockets stay behind
	// (a listener's file outlives the process that was killed holding it).
	var stale []string
	for range 2 {
		d, err := os.MkdirTemp(dir, DirPrefix("mine"))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(d, SocketName), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close()
		stale = append(stale, d)
	}
	keep := filepath.Join(dir, "not-a-channel")
	if err := os.Mkdir(keep, 0o700); err != nil {
		t.Fatal(err)
	}
	logs := &strings.Builder{}
	if _, err := New(ps, dir, "mine", owner.ID{}, zerolog.New(logs)); err != nil {
		t.Fatal(err)
	}
	for _, d := range stale {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("stale channel directory %s left: %v", d, err)
		}
	}
	if !strings.Contains(logs.String(), `"channels":2`) {
		t.Errorf("log: %s", logs.String())
	}
	for _, d := range []string{live.Dir(), keep} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
	if status, _ := ask(t, live, "CONNECT localhost:443 HTTP/1.1\r\n\r\n", ""); !strings.HasPrefix(status, "403 egress denied (special_name)") {
		t.Errorf("the other instance's live channel: %q", status)
	}
}

// TestProxyCapBeforeLookup: past max_connections, names a program chooses under a
// wildcard are refused without a lookup (and those the profile refuses are neither
// looked up nor counted).
func TestProxyCapBeforeLookup(t *testing.T) {
	ts := newTestServer(t, `{"profiles": {"w": {"hosts": ["*.wild.example.org"], "max_connections": 2}}}`, echoUpstream(t))
	ch, err := ts.OpenChannel("w")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if status, _ := ask(t, ch, "CONNECT other.example.net:443 HTTP/1.1\r\n\r\n", ""); !strings.HasPrefix(status, "403 egress denied (host_not_allowed)") {
		t.Errorf("refused name: %q", status)
	}
	for i := range 2 { // the two the cap allows (they resolve to nothing)
		ask(t, ch, fmt.Sprintf("CONNECT n%d.wild.example.org:443 HTTP/1.1\r\n\r\n", i), "")
	}
	if got := len(ts.res.lookups()); got != 2 {
		t.Fatalf("%d lookups under the cap, want 2: %q", got, ts.res.lookups())
	}
	for i := range 20 {
		status, _ := ask(t, ch, fmt.Sprintf("CONNECT past%d.wild.example.org:443 HTTP/1.1\r\n\r\n", i), "")
		if !strings.HasPrefix(status, "403 egress denied (connection_limit)") {
			t.Errorf("past the cap: %q", status)
		}
	}
	if got := ts.res.lookups(); len(got) != 2 {
		t.Errorf("%d lookups past the cap, want none: %q", len(got)-2, got[2:])
	}
}

// TestProxyLogsWildcardAsHash: a name under a wildcard is the program's text: the log
// has the wildcard and a hash of the name, never the name; an exact entry is logged.
func TestProxyLogsWildcardAsHash(t *testing.T) {
	ts := newTestServer(t, unitProfiles, echoUpstream(t))
	ts.res.answers["secret-data-4711.wild.example.org."] = []netip.Addr{netip.MustParseAddr("93.184.215.14")}
	ch, err := ts.OpenChannel("p")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, head := range []string{
		"CONNECT secret-data-4711.wild.example.org:443 HTTP/1.1\r\n\r\n",  // allowed
		"CONNECT SECRET-data-4711.wild.example.org.:443 HTTP/1.1\r\n\r\n", // same name, spelt otherwise
		"CONNECT secret-data-4712.wild.example.org:443 HTTP/1.1\r\n\r\n",  // no address
		"CONNECT secret-data-4713.wild.example.org:22 HTTP/1.1\r\n\r\n",   // port refused
		"CONNECT pub.example.org:443 HTTP/1.1\r\n\r\n",
	} {
		ask(t, ch, head, "")
	}
	ch.Close() // the log lines are written as the connections end
	logs := ts.log()
	if strings.Contains(strings.ToLower(logs), "secret-data") {
		t.Errorf("the log holds a name the program chose: %s", logs)
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d log lines, want 5: %s", len(lines), logs)
	}
	hashes, exact := map[string]int{}, 0
	for _, line := range lines { // in the order the connections ended
		var rec struct {
			Host     string `json:"host"`
			Hash     string `json:"host_hash"`
			Redacted bool   `json:"host_redacted"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Host == "pub.example.org" && rec.Hash == "" && !rec.Redacted {
			exact++
			continue
		}
		if rec.Host != "*.wild.example.org" || len(rec.Hash) != 12 || !rec.Redacted {
			t.Errorf("host %q, host_hash %q, host_redacted %v; want the wildcard, 12 hex digits, true", rec.Host, rec.Hash, rec.Redacted)
		}
		hashes[rec.Hash]++
	}
	if exact != 1 || len(hashes) != 3 {
		t.Errorf("%d lines of the exact entry, hashes %v; want 1, and 3 hashes (one per canonical name): %s", exact, hashes, logs)
	}
	// The hash is keyed: another Server hashes the same name otherwise.
	other := newTestServer(t, unitProfiles, echoUpstream(t))
	if a, b := ts.nameHash("secret-data-4711.wild.example.org"), other.nameHash("secret-data-4711.wild.example.org"); a == b {
		t.Errorf("two servers hash a name alike (%s): the hash is not keyed", a)
	}
}

// TestStaleChannelsOfLivePeerKept: servers sharing an instance name and a socket
// directory (two servers with the defaults on one host) do not remove each other's
// channels: a starting server removes only those whose owner is proven gone (or that
// name none), and a peer's channel keeps serving.
func TestStaleChannelsOfLivePeerKept(t *testing.T) {
	ps, err := egress.ParseProfiles([]byte(unitProfiles))
	if err != nil {
		t.Fatal(err)
	}
	me, err := owner.Proc{}.Self("h")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// The peer: a live process of this host that is not this one (the test's parent).
	peer, dead := me, me
	peer.Pid = os.Getppid()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", peer.Pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	if peer.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		t.Fatal(err)
	}
	dead.Start++ // this pid, another start time: a server gone
	dir := t.TempDir()
	live, err := New(ps, dir, "same", peer, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := live.OpenChannel("p")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if b, err := os.ReadFile(ch.Dir() + ".owner"); err != nil || string(b) != peer.String() {
		t.Fatalf("the channel's owner file: got %q, %v, want %q", b, err, peer)
	}
	gone, err := New(ps, dir, "same", dead, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	deadCh, err := gone.OpenChannel("p")
	if err != nil {
		t.Fatal(err)
	}
	defer deadCh.Close()
	deadDir := deadCh.Dir()
	deadCh.ln.SetUnlinkOnClose(false) // as a killed server leaves it
	deadCh.ln.Close()
	bare, err := os.MkdirTemp(dir, DirPrefix("same")) // from a server before owner files
	if err != nil {
		t.Fatal(err)
	}

	if _, err := New(ps, dir, "same", me, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{deadDir, deadDir + ".owner", bare} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s of a server gone: %v, want it removed", d, err)
		}
	}
	if _, err := os.Stat(ch.Dir()); err != nil {
		t.Errorf("the live peer's channel directory: %v, want it kept", err)
	}
	if status, _ := ask(t, ch, "CONNECT localhost:443 HTTP/1.1\r\n\r\n", ""); !strings.HasPrefix(status, "403 egress denied (special_name)") {
		t.Errorf("the live peer's channel after another server's start: %q, want it serving", status)
	}
	ch.Close()
	if _, err := os.Stat(ch.Dir() + ".owner"); !os.IsNotExist(err) {
		t.Errorf("owner file after Close: %v, want it removed", err)
	}
}
