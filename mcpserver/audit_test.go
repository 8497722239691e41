package mcpserver

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// logValues is every value of key in the JSON log lines of logs, each once.
func logValues(t *testing.T, logs, key string) []string {
	t.Helper()
	var vs []string
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if v, ok := m[key].(string); ok && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	return vs
}

// TestAuditLabels: what the server hands the launcher to name a sandbox in the egress
// audit log is what its own log lines say of the call: a one-shot call's exec_id, a
// background run's hash beside its call's exec_id, a session's hash; never a handle.
func TestAuditLabels(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := zerolog.New(zerolog.SyncWriter(&lockedWriter{&logs, &mu}))
	r, f := &fakeRunner{}, &fakeSessions{}
	cs := clientOf(t, New(r, Options{Runs: runOpts(4), Sessions: sessionOpts(f), Logger: log}))
	logged := func(key string) []string {
		mu.Lock()
		defer mu.Unlock()
		return logValues(t, logs.String(), key)
	}

	call(t, t.Context(), cs, `{"code":"print(1)"}`)
	ids := logged("exec_id")
	if got, want := r.calls()[0].Audit, (backend.AuditLabel{ExecID: ids[0]}); len(ids) != 1 || got != want {
		t.Errorf("one-shot: got label %+v, want %+v (logged exec_ids %v)", got, want, ids)
	}

	run := startRun(t, cs, map[string]any{"code": "print(2)"})
	if res := runWait(t, cs, run, 10); res.IsError {
		t.Fatalf("run_wait: %s", text(t, res))
	}
	ids, runs := logged("exec_id"), logged("run")
	got := r.calls()[1].Audit
	if len(ids) != 2 || got.ExecID != ids[1] || got.Run != handleHash(run) || runs[0] != got.Run || got.Session != "" {
		t.Errorf("background run: got label %+v, want exec_id %v[1] and run %q as logged %v", got, ids, handleHash(run), runs)
	}

	sess := createSession(t, cs)
	f.mu.Lock()
	label := f.opened[0].Audit
	f.mu.Unlock()
	if want := (backend.AuditLabel{Session: handleHash(sess.SessionID)}); label != want || !strings.Contains(strings.Join(logged("session"), " "), want.Session) {
		t.Errorf("session: got label %+v, want %+v as logged %v", label, want, logged("session"))
	}
}
