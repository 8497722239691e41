package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

func writeProfiles(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNewEgress: the proxy starts only with profiles; a remote engine, and a server in
// a container without --egress-dir, are refused with what to do.
func TestNewEgress(t *testing.T) {
	good := writeProfiles(t, `{"profiles": {"deb": {"hosts": ["deb.debian.org"]}, "org": {"hosts": ["example.org"], "ports": [443, 8443]}}}`)
	c := config.Defaults()
	if srv, err := newEgress(c, "unix:///var/run/docker.sock", owner.ID{}, zerolog.Nop()); srv != nil || err != nil {
		t.Fatalf("no profiles: got %v, %v", srv, err)
	}
	c.EgressProfiles, c.EgressDir = good, filepath.Join(t.TempDir(), "sockets")
	if _, err := newEgress(c, "ssh://user@host", owner.ID{}, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "egress profiles need a local engine") {
		t.Errorf("remote engine: got %v", err)
	}
	srv, err := newEgress(c, "unix:///var/run/docker.sock", owner.ID{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(c.EgressDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	tool := egressTool(srv)
	if len(tool) != 2 || tool[0].Name != "deb" || tool[1].Name != "org" || len(tool[1].Ports) != 2 {
		t.Errorf("exec's profiles: got %+v", tool)
	}

	was := inContainer
	inContainer = func() bool { return true }
	defer func() { inContainer = was }()
	c.EgressDir = ""
	if _, err := newEgress(c, "unix:///var/run/docker.sock", owner.ID{}, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "set --egress-dir (MCP_EXEC_EGRESS_DIR)") {
		t.Errorf("in a container without --egress-dir: got %v", err)
	}
}
