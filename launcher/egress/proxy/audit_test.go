package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAuditRotates: past its bound the audit file is renamed to FILE.1, replacing the
// one before, so that the two together never pass twice the bound.
func TestAuditRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.max = 1000
	for i := range 100 {
		if err := a.write(AuditLine{Time: time.Now(), Event: "connection", Profile: "p", Port: i, Decision: "allowed"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{path, path + ".1"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > a.max || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %d bytes, mode %v; want at most %d, 0600", p, st.Size(), st.Mode().Perm(), a.max)
		}
	}
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "\"port\":99,\"method\":\"\",\"decision\":\"allowed\",\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":0}\n") {
		t.Errorf("the current file does not end with the last line: %s", b)
	}
	// A reopened audit appends, counting what is there.
	a.Close()
	a2, err := OpenAudit(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if a2.size != int64(len(b)) {
		t.Errorf("reopened: size %d, want %d", a2.size, len(b))
	}
}
