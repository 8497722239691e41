package proxy_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/egress/egresstest"
)

// TestLiveEgressWithTools: code mode and a profile together (exec with upstreams and
// egress): one program calls a tool over its stream and reaches the profile's host
// over its channel, TLS verified, and a host outside the profile still gets 403.
func TestLiveEgressWithTools(t *testing.T) {
	l, _, _, served := liveLauncher(t)
	if !served {
		return
	}
	var calls atomic.Int32
	tools := &launcher.Tools{
		Catalog: []byte(`{"servers":[{"name":"echo","module":"echo","tools":[
 {"name":"echo","function":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}]}`),
		Serve: func(_ context.Context, req []byte, _ int) []byte {
			calls.Add(1)
			return []byte(`{"result":{"content":[],"structuredContent":{"text":"hi"}}}`)
		},
	}
	out := run(t, l, launcher.Job{Egress: "deb", Tools: tools, Files: []launcher.File{egresstest.HostTrust(t)}, Code: `
import json, ssl, urllib.request
from mcptools import echo
out = {"tool": "ok %s" % echo.echo(text="hi")}
ctx = ssl.create_default_context(cafile="host-ca.pem")
with urllib.request.urlopen("https://deb.debian.org/debian/dists/stable/Release", context=ctx, timeout=30) as r:
    out["https"] = "ok %d %s" % (r.status, r.read(16).decode())
try:
    urllib.request.urlopen("https://example.com/", timeout=20)
    out["other_host"] = "ok"
except Exception as e:
    out["other_host"] = "err %s" % e
print(json.dumps(out))
`})
	want(t, out, "tool", "ok {'text': 'hi'}")
	want(t, out, "https", "ok 200 Origin: Debian")
	want(t, out, "other_host", "err <urlopen error Tunnel connection failed: 403 egress denied (host_not_allowed)")
	if n := calls.Load(); n != 1 {
		t.Errorf("the tool was served %d times, want 1", n)
	}
}
