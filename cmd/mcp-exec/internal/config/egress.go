package config

import (
	"fmt"

	"github.com/mcp-exec/mcp-exec/launcher/egress"
)

// cfgEgressProfiles checks --egress-profiles: the file parses and vets (no IP
// literal, no special name, no wildcard over a public suffix), and the backend can
// give a sandbox its channel. Kubernetes and the process backend are refused in this
// version: see docs/egress.md. Whether the runtime lets the
// channel through (gVisor needs runsc's --host-uds=open) is checked at start-up with a
// sandbox (checkEgress in package main).
func cfgEgressProfiles(c Config) string {
	if c.EgressProfiles == "" {
		return ""
	}
	if _, err := egress.LoadProfiles(c.EgressProfiles); err != nil {
		return err.Error()
	}
	if c.Backend != "docker" && c.Backend != "kubernetes" {
		return fmt.Sprintf("needs --backend docker (Docker or Podman) or kubernetes, got %q: the %s backend cannot give a sandbox a channel of its own to the proxy", c.Backend, c.Backend)
	}
	return ""
}
