package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// jsonLines is the JSON objects of text's lines (others skipped).
func jsonLines(text string) []map[string]any {
	var ms []map[string]any
	for _, l := range strings.Split(text, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// valuesOf is every value of key in lines whose "message" is msg ("": any line), in
// order, each once.
// logged waits up to 10 s for n lines of msg in srv's log and returns their key's
// values (fewer, or more, when that is what there is).
func logged(t *testing.T, srv *e2e.Server, key, msg string, n int) []string {
	t.Helper()
	var vs []string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if vs = valuesOf(jsonLines(srv.Logs.String()), key, msg); len(vs) >= n || time.Now().After(end) {
			return vs
		}
	}
}

func valuesOf(lines []map[string]any, key, msg string) []string {
	var vs []string
	for _, m := range lines {
		v, _ := m[key].(string)
		if v != "" && (msg == "" || m["message"] == msg) && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	return vs
}

// TestEgressAuditLabelsE2E runs the binary with --egress-audit and makes a one-shot
// call, a background run and a call in a session, each with a profile: each one's
// audit lines carry the id the server's log has for it (the exec line's exec_id; the
// run's hash beside its call's exec_id; the session's hash), so an operator can join
// the two, and no run_id or session_id appears in the audit file.
func TestEgressAuditLabelsE2E(t *testing.T) {
	if runtime := os.Getenv("MCP_EXEC_TEST_RUNTIME"); !launchertest.HostUDS(t, runtime) {
		t.Skipf("runtime %q does not let the channel through (TestEgressE2E checks the refusal)", runtime)
	}
	bin := e2e.Build(t)
	dir := t.TempDir()
	profiles := filepath.Join(dir, "egress.json")
	if err := os.WriteFile(profiles, []byte(`{"profiles": {"deb": {"hosts": ["deb.debian.org"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.jsonl")
	env := e2e.Env("MCP_EXEC_POOL_SIZE=0", "MCP_EXEC_EGRESS_PROFILES="+profiles, "MCP_EXEC_EGRESS_DIR="+filepath.Join(dir, "s"),
		"MCP_EXEC_EGRESS_AUDIT="+audit)
	srv := e2e.Serve(t, bin, env, "http", "test-egress-audit-e2e", e2e.Random())
	cs := srv.Connect(t, nil, nil)
	// Whether the connection gets through depends on this machine's DNS; either way
	// it has its audit line.
	const code = `
import urllib.request
try:
    urllib.request.urlopen("https://deb.debian.org/debian/", timeout=20)
except Exception as e:
    pass
print("done")
`
	if _, res := bgCall(t, cs, "exec", map[string]any{"egress": "deb", "code": code}); res.IsError {
		t.Fatalf("one-shot exec: %v", res.Content)
	}
	// The log reaches srv.Logs through a pipe and a goroutine: a line the server wrote
	// before its answer may come after it.
	oneShot := logged(t, srv, "exec_id", "exec", 1)
	runID := bgStart(t, cs, map[string]any{"egress": "deb", "code": code})
	if r, res := bgWait(t, cs, runID, 2*time.Minute); res.IsError || r.ExitCode != 0 {
		t.Fatalf("background run: %+v %v", r, res.Content)
	}
	_, res := bgCall(t, cs, "session_create", map[string]any{"egress": "deb"})
	if res.IsError {
		t.Fatalf("session_create: %v", res.Content)
	}
	var sess struct {
		SessionID string `json:"session_id"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &sess)
	if _, res := bgCall(t, cs, "exec", map[string]any{"session_id": sess.SessionID, "code": code}); res.IsError {
		t.Fatalf("exec in the session: %v", res.Content)
	}
	if _, res := bgCall(t, cs, "session_close", map[string]any{"session_id": sess.SessionID}); res.IsError {
		t.Fatalf("session_close: %v", res.Content)
	}

	execs := logged(t, srv, "exec_id", "exec", 3)
	logs := jsonLines(srv.Logs.String())
	runs := valuesOf(logs, "run", "background run started")
	sessions := valuesOf(logs, "session", "session created")
	if len(oneShot) != 1 || len(execs) != 3 || len(runs) != 1 || len(sessions) != 1 {
		t.Fatalf("server log: exec_ids %v (one-shot %v), runs %v, sessions %v; want 3, 1, 1, 1:\n%s", execs, oneShot, runs, sessions, srv.Logs.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := os.ReadFile(audit)
		if err != nil {
			t.Fatal(err)
		}
		lines := jsonLines(string(a))
		has := func(want map[string]string) bool {
			return slices.ContainsFunc(lines, func(m map[string]any) bool {
				for k, v := range want {
					if s, _ := m[k].(string); s != v {
						return false
					}
				}
				return m["event"] == "connection"
			})
		}
		one := has(map[string]string{"exec_id": oneShot[0], "run": "", "session": ""})
		bg := has(map[string]string{"exec_id": execs[1], "run": runs[0], "session": ""})
		se := has(map[string]string{"exec_id": "", "run": "", "session": sessions[0]})
		if one && bg && se {
			if strings.Contains(string(a), runID) || strings.Contains(string(a), sess.SessionID) {
				t.Errorf("the audit file holds a handle:\n%s", a)
			}
			t.Logf("audit:\n%s", a)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit lines: one-shot (exec_id %s) %v, background run (run %s, exec_id %s) %v, session (%s) %v; want all:\n%s",
				oneShot[0], one, runs[0], execs[1], bg, sessions[0], se, a)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
