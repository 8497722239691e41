package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// The public host of the live tests: one the CI machine reaches (Debian's mirrors, on
// 443 for TLS and on 80 for plain HTTP).
const (
	liveHost = egresstest.Host
	livePath = "/debian/dists/stable/Release"
	canary   = "CANARY-7f3e9a-caller-data"
)

const liveProfiles = `{"profiles": {
  "deb": {"hosts": ["deb.debian.org"], "ports": [443, 80]},
  "other": {"hosts": ["example.org"]},
  "tiny": {"hosts": ["deb.debian.org"], "max_connections": 1, "max_bytes": 20000}
}}`

// recorder is the proxy with the opened channels' directories noted, so that a test
// can hand one sandbox another's host path.
type recorder struct {
	*proxy.Server
	opened chan string
}

func (r *recorder) Open(ctx context.Context, profile string, label backend.AuditLabel) (backend.EgressChannel, error) {
	ch, err := r.Server.Open(ctx, profile, label)
	if err == nil {
		select {
		case r.opened <- ch.Dir():
		default:
		}
	}
	return ch, err
}

// liveLauncher is a started launcher with the live profiles whose start-up check
// (CheckEgress) has run; the check's answer must agree with the engine's own
// configuration of the runtime (launchertest.HostUDS). served reports whether the check passed:
// where it rightly refused (gVisor without --host-uds=open), the refusal is checked
// here and a test of the allowed paths has nothing more to run.
func liveLauncher(t testing.TB) (l *launcher.Launcher, rec *recorder, logs *launchertest.Buffer, served bool) {
	t.Helper()
	ps, err := egress.ParseProfiles([]byte(liveProfiles))
	if err != nil {
		t.Fatal(err)
	}
	logs = &launchertest.Buffer{}
	srv, err := proxy.New(ps, t.TempDir(), "live", owner.ID{}, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	egresstest.AdaptToGateway(t, srv)
	rec = &recorder{Server: srv, opened: make(chan string, 8)}
	l = launchertest.New(t, launcher.Options{Egress: rec, MaxConcurrent: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err = l.CheckEgress(ctx)
	if launchertest.HostUDS(t, l.Options().Runtime) {
		if err != nil {
			t.Fatalf("start-up check: %v", err)
		}
		return l, rec, logs, true
	}
	if !errors.Is(err, launcher.ErrEgressChannel) || !strings.Contains(err.Error(), "--host-uds=open") {
		t.Fatalf("start-up check under runtime %q, whose runtimeArgs lack --host-uds: got %v, want %v naming --host-uds=open", l.Options().Runtime, err, launcher.ErrEgressChannel)
	}
	t.Logf("the start-up check refused, as it must: %v", err)
	if _, err := l.Run(context.Background(), launcher.Job{Code: "print(1)", Egress: "deb"}); !errors.Is(err, launcher.ErrEgressUnchecked) {
		t.Errorf("a job with a profile after the refusal: got %v, want %v", err, launcher.ErrEgressUnchecked)
	}
	return l, rec, logs, false
}

func run(t *testing.T, l *launcher.Launcher, job launcher.Job) map[string]string {
	t.Helper()
	if job.Timeout == 0 {
		job.Timeout = 90 * time.Second
	}
	res, err := l.Run(context.Background(), job)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("output %q: %v (stderr %s)", res.Stdout, err, res.Stderr)
	}
	return out
}

func want(t *testing.T, out map[string]string, key, prefix string) {
	t.Helper()
	if !strings.HasPrefix(out[key], prefix) {
		t.Errorf("%s: got %q, want it to start with %q", key, out[key], prefix)
	}
}

// TestLiveEgressProfile runs a sandbox with a profile on the real engine and a real
// public host: what the profile names works, TLS verified end to end, and nothing else
// leaves, while the sandbox keeps no network of its own.
func TestLiveEgressProfile(t *testing.T) {
	l, _, logs, served := liveLauncher(t)
	if !served {
		return
	}
	out := run(t, l, launcher.Job{Code: egresstest.Probes, Stdin: canary, Egress: "deb", Files: []launcher.File{egresstest.HostTrust(t)}})
	egresstest.CheckProbes(t, out)

	// The log names hosts, ports and decisions, and nothing of the requests.
	got := logs.String()
	for _, s := range []string{`"host":"deb.debian.org","host_redacted":false,"port":443,"decision":"allowed"`, `"host":"","host_redacted":true,"port":80,"decision":"denied","reason":"host_not_allowed"`} {
		if !strings.Contains(got, s) {
			t.Errorf("proxy log lacks %s:\n%s", s, got)
		}
	}
	if strings.Contains(strings.ToLower(got), strings.ToLower(canary)) || strings.Contains(got, "Release") {
		t.Errorf("proxy log holds request data:\n%s", got)
	}
}

// TestLiveEgressNoProfile: a job without a profile, on a launcher that has profiles,
// gets a sandbox with no channel, no relay and no proxy variables.
func TestLiveEgressNoProfile(t *testing.T) {
	l, _, _, _ := liveLauncher(t)
	wantNoEgress(t, run(t, l, launcher.Job{Code: noEgressProgram}))
}

// noEgressProgram reports what a sandbox without a profile has of egress: an /egress
// mount, proxy variables, a relay on the relay's port. wantNoEgress checks it has none.
const noEgressProgram = `
import json, os, socket
out = {"egress_dir": str(os.path.exists("/egress")), "env": str(sorted(k for k in os.environ if "proxy" in k.lower()))}
try:
    socket.create_connection(("127.0.0.1", 3128), timeout=5)
    out["relay"] = "ok"
except Exception as e:
    out["relay"] = "err %s" % type(e).__name__
print(json.dumps(out))
`

func wantNoEgress(t *testing.T, out map[string]string) {
	t.Helper()
	want(t, out, "egress_dir", "False")
	want(t, out, "env", "[]")
	want(t, out, "relay", "err ConnectionRefusedError")
}

// TestLiveEgressChannelIsPrivate: while one sandbox holds its channel, another (with
// another profile) can neither reach the first one's socket by its host path nor get
// the first one's hosts through its own channel, and the only socket file anywhere in
// its filesystem is its own channel's. Under gVisor it runs with --host-uds=open
// (runsc-egress), where a sandbox may connect to any host socket it can see: so what
// it can see is what the test pins down.
func TestLiveEgressChannelIsPrivate(t *testing.T) {
	l, rec, _, served := liveLauncher(t)
	if !served {
		return
	}
	first := make(chan launcher.Result, 1)
	go func() {
		res, _ := l.Run(context.Background(), launcher.Job{Code: `
import os, time
print(os.path.exists("/egress/proxy.sock"))
time.sleep(15)`, Egress: "deb", Timeout: 60 * time.Second})
		first <- res
	}()
	var dir string
	select {
	case dir = <-rec.opened:
	case <-time.After(60 * time.Second):
		t.Fatal("the first sandbox's channel never opened")
	}
	out := run(t, l, launcher.Job{Stdin: dir, Egress: "other", Code: `
import json, os, socket, stat, sys, urllib.request
out = {}
found, unlisted = [], []
for root, dirs, files in os.walk("/", onerror=lambda e: unlisted.append(e.filename)):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys")]
    for f in files + dirs:
        p = os.path.join(root, f)
        try:
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                found.append(p)
        except OSError:
            pass
out["sockets"] = " ".join(sorted(found))
# A directory it cannot list on the image's own filesystem holds no socket (an image
# layer cannot carry one); one on another filesystem is a mount.
rootdev = os.stat("/").st_dev
out["unlisted_mounts"] = " ".join(sorted(d for d in unlisted if os.stat(d).st_dev != rootdev))
out["unlisted"] = " ".join(sorted(unlisted))
path = sys.stdin.read().strip() + "/proxy.sock"
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    out["host_path"] = "ok"
except Exception as e:
    out["host_path"] = "err %s" % type(e).__name__
try:
    out["deb"] = "ok %s" % urllib.request.urlopen("https://deb.debian.org/", timeout=20).status
except Exception as e:
    out["deb"] = "err %s" % e
print(json.dumps(out))
`})
	// Its own channel's directory is the one mount it may search but not list.
	t.Logf("second sandbox: socket files %q, directories it cannot list %q", out["sockets"], out["unlisted"])
	if out["sockets"] != "" || out["unlisted_mounts"] != "/egress" {
		t.Errorf("second sandbox: socket files %q and mounts it cannot list %q, want none and /egress", out["sockets"], out["unlisted_mounts"])
	}
	want(t, out, "host_path", "err FileNotFoundError")
	want(t, out, "deb", "err <urlopen error Tunnel connection failed: 403 egress denied (host_not_allowed)")
	res := <-first
	if strings.TrimSpace(res.Stdout) != "True" {
		t.Errorf("first sandbox: stdout %q, stderr %q, want True", res.Stdout, res.Stderr)
	}
}

// TestLiveEgressCaps: a profile's caps hold per call: past max_bytes a download is cut,
// past max_connections the next connection is refused.
func TestLiveEgressCaps(t *testing.T) {
	l, _, _, served := liveLauncher(t)
	if !served {
		return
	}
	out := run(t, l, launcher.Job{Egress: "tiny", Code: `
import json, urllib.request
out = {}
for name in ("first", "second"):
    try:
        with urllib.request.urlopen("https://deb.debian.org/debian/dists/stable/Release", timeout=30) as r:
            out[name] = "ok %d bytes" % len(r.read())
    except Exception as e:
        out[name] = "err %s: %s" % (type(e).__name__, e)
print(json.dumps(out))
`})
	if strings.HasPrefix(out["first"], "ok") {
		t.Errorf("first: got %q, want the download cut at 20000 bytes", out["first"])
	}
	want(t, out, "second", "err URLError: <urlopen error Tunnel connection failed: 403 egress denied (connection_limit)")
}
