package proxy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
)

// auditProgram calls the injected host and a host outside the profile.
const auditProgram = `
import json, urllib.request
out = {}
try:
    with urllib.request.urlopen("https://api.example.org/user", timeout=30) as r:
        out["api"] = "ok %d" % r.status
except Exception as e:
    out["api"] = "err %s" % e
try:
    urllib.request.urlopen("https://nope.example.org/", timeout=20)
except Exception as e:
    out["refused"] = "err %s" % e
print(json.dumps(out))
`

// TestLiveEgressAuditLabel: on the real engine, the audit lines of a one-shot job's
// sandbox carry the job's label (Job.Audit) and those of a session's sandbox the
// session's (SessionOptions.Audit), for the request, its connection and a refusal
// alike; no line goes unlabelled.
func TestLiveEgressAuditLabel(t *testing.T) {
	l, _, _, audit, served := injectLauncher(t)
	if !served {
		return
	}
	job := backend.AuditLabel{ExecID: "0b1e57a1e0ff"}
	out := run(t, l, launcher.Job{Code: auditProgram, Egress: "api", Audit: job})
	want(t, out, "api", "ok 200")
	want(t, out, "refused", "err <urlopen error Tunnel connection failed: 403")

	sess := backend.AuditLabel{Session: "5e5510aa0b1c"}
	s, err := l.OpenSession(t.Context(), launcher.SessionOptions{Expires: time.Now().Add(time.Hour), Egress: "api", Audit: sess})
	if err != nil {
		t.Fatalf("session with a profile: %v", err)
	}
	out = sessionRun(t, s, launcher.Job{Code: auditProgram})
	want(t, out, "api", "ok 200")
	s.Close() // its channel's open connections end and are written

	got := map[backend.AuditLabel][]string{}
	for _, line := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var a proxy.AuditLine
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		k := backend.AuditLabel{ExecID: a.ExecID, Session: a.Session, Run: a.Run}
		if !slices.Contains(got[k], a.Event+" "+a.Decision) {
			got[k] = append(got[k], a.Event+" "+a.Decision)
		}
	}
	for _, label := range []backend.AuditLabel{job, sess} {
		slices.Sort(got[label])
		if g := strings.Join(got[label], ", "); g != "connection allowed, connection denied, request allowed" {
			t.Errorf("lines labelled %+v: got %q, want a request, its connection and a refusal:\n%s", label, g, audit.String())
		}
	}
	if len(got) != 2 {
		t.Errorf("got lines under %d labels, want 2 (none unlabelled):\n%s", len(got), audit.String())
	}
}
