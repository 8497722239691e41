package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeProfiles(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEgressConfig: a profiles file is vetted at start-up, and the backends that
// cannot give a sandbox a channel of its own are refused, each error naming the flag
// and the variable.
func TestEgressConfig(t *testing.T) {
	good := writeProfiles(t, `{"profiles": {"deb": {"hosts": ["deb.debian.org"]}}}`)
	t.Setenv("MCP_EXEC_TEST_TOKEN", "canary-inject-SECRET")
	inject := writeProfiles(t, `{"profiles": {"gh": {"hosts": ["api.github.com"], "inject": {"api.github.com": {"headers": {"Authorization": "Bearer ${env:MCP_EXEC_TEST_TOKEN}"}}}}}}`)
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" for no error
	}{
		{"good", func(c *Config) { c.EgressProfiles = good }, ""},
		{"none", func(c *Config) {}, ""},
		{"missing file", func(c *Config) { c.EgressProfiles = "/nonexistent/egress.json" }, "--egress-profiles (MCP_EXEC_EGRESS_PROFILES) reading egress profiles"},
		{"ip literal", func(c *Config) {
			c.EgressProfiles = writeProfiles(t, `{"profiles": {"x": {"hosts": ["10.0.0.1"]}}}`)
		}, `--egress-profiles (MCP_EXEC_EGRESS_PROFILES) egress profiles`},
		{"private name", func(c *Config) {
			c.EgressProfiles = writeProfiles(t, `{"profiles": {"x": {"hosts": ["db.internal"]}}}`)
		}, `profile "x": hosts[0] "db.internal"`},
		{"wide wildcard", func(c *Config) {
			c.EgressProfiles = writeProfiles(t, `{"profiles": {"x": {"hosts": ["*.co.uk"]}}}`)
		}, "a wildcard over a public suffix"},
		// Kubernetes: the backend carries each pod's connections (port-forward streams).
		{"kubernetes", func(c *Config) { c.EgressProfiles, c.Backend = good, "kubernetes" }, ""},
		{"process", func(c *Config) { c.EgressProfiles, c.Backend = good, "process" }, `--egress-profiles (MCP_EXEC_EGRESS_PROFILES) needs --backend docker (Docker or Podman) or kubernetes, got "process"`},
		// gVisor is checked at start-up, with a sandbox (checkEgress): the runtime's
		// flags are the engine's, not the server's.
		{"gvisor", func(c *Config) { c.EgressProfiles, c.Runtime = good, "runsc" }, ""},
		{"relative dir", func(c *Config) { c.EgressDir = "egress" }, `--egress-dir (MCP_EXEC_EGRESS_DIR) must be an absolute path, got "egress"`},
		{"inject", func(c *Config) { c.EgressProfiles = inject }, ""},
		{"inject unset variable", func(c *Config) {
			c.EgressProfiles = writeProfiles(t, `{"profiles": {"gh": {"hosts": ["api.github.com"], "inject": {"api.github.com": {"headers": {"Authorization": "Bearer ${env:MCP_EXEC_TEST_UNSET_TOKEN}"}}}}}}`)
		}, `profile "gh": inject "api.github.com": headers "Authorization": ${env:MCP_EXEC_TEST_UNSET_TOKEN} is not set`},
		// A pod's gate writes the CA bundle (launcher/kube).
		{"inject kubernetes", func(c *Config) { c.EgressProfiles, c.Backend = inject, "kubernetes" }, ""},
		{"audit", func(c *Config) { c.EgressProfiles, c.EgressAudit = good, "/var/log/egress.jsonl" }, ""},
		{"audit stdout", func(c *Config) { c.EgressProfiles, c.EgressAudit, c.Transport = good, "-", "http" }, ""},
		{"audit stdout stdio", func(c *Config) { c.EgressProfiles, c.EgressAudit = good, "-" }, "--egress-audit (MCP_EXEC_EGRESS_AUDIT) - (stdout) is the MCP stream"},
		{"audit without profiles", func(c *Config) { c.EgressAudit = "/var/log/egress.jsonl" }, "--egress-audit (MCP_EXEC_EGRESS_AUDIT) needs --egress-profiles"},
		{"inject ca not pem", func(c *Config) { c.EgressInjectCA = good }, "--egress-inject-ca (MCP_EXEC_EGRESS_INJECT_CA) " + good + " holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfgWantDefaults()
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
