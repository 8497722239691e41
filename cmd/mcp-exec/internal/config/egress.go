package config

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// Secrets resolves the ${env:NAME} and ${file:/path} references of the egress
// profiles' inject rules from this process, as the upstreams file's are.
func Secrets() egress.Secrets {
	return upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile}
}

// cfgEgressProfiles checks --egress-profiles: the file parses and vets (no IP
// literal, no special name, no wildcard over a public suffix), and the backend can
// give a sandbox its channel: the process backend cannot (docs/egress.md). Whether
// the runtime lets the channel through (gVisor needs runsc's --host-uds=open) is
// checked at start-up with a sandbox (checkEgress in package main).
func cfgEgressProfiles(c Config) string {
	if c.EgressProfiles == "" {
		return ""
	}
	if _, err := egress.LoadProfiles(c.EgressProfiles, Secrets()); err != nil {
		return err.Error()
	}
	if c.Backend != "docker" && c.Backend != "kubernetes" {
		return fmt.Sprintf("needs --backend docker (Docker or Podman) or kubernetes, got %q: the %s backend cannot give a sandbox a channel of its own to the proxy", c.Backend, c.Backend)
	}
	return ""
}

// cfgEgressAudit checks --egress-audit: it needs profiles, and stdout is the MCP
// stream under --transport stdio.
func cfgEgressAudit(c Config) string {
	switch {
	case c.EgressAudit == "":
		return ""
	case c.EgressProfiles == "":
		return "needs " + Name("egress-profiles") + ": without profiles there is no egress to audit"
	case c.EgressAudit == "-" && c.Transport == "stdio":
		return "- (stdout) is the MCP stream under --transport stdio: name a file"
	case c.EgressAudit != "-" && !filepath.IsAbs(c.EgressAudit):
		return fmt.Sprintf("must be an absolute path or -, got %q", c.EgressAudit)
	}
	return ""
}

// cfgEgressInjectCA checks --egress-inject-ca: a PEM file with at least one
// certificate.
func cfgEgressInjectCA(c Config) string {
	if c.EgressInjectCA == "" {
		return ""
	}
	if _, err := LoadCAs(c.EgressInjectCA); err != nil {
		return err.Error()
	}
	return ""
}

// LoadCAs reads a PEM file of CA certificates as a pool.
func LoadCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
