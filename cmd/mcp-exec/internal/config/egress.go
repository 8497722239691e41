package config

import (
	"fmt"
	"os"

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
// give a sandbox its channel. Kubernetes and the process backend are refused in this
// version: see docs/egress.md. Whether the runtime lets the
// channel through (gVisor needs runsc's --host-uds=open) is checked at start-up with a
// sandbox (checkEgress in package main).
func cfgEgressProfiles(c Config) string {
	if c.EgressProfiles == "" {
		return ""
	}
	ps, err := egress.LoadProfiles(c.EgressProfiles, Secrets())
	if err != nil {
		return err.Error()
	}
	if c.Backend != "docker" && c.Backend != "kubernetes" {
		return fmt.Sprintf("needs --backend docker (Docker or Podman) or kubernetes, got %q: the %s backend cannot give a sandbox a channel of its own to the proxy", c.Backend, c.Backend)
	}
	if hosts := ps.InjectHosts(); c.Backend == "kubernetes" && len(hosts) > 0 {
		// The bundle that makes a sandbox trust the proxy's CA travels in the
		// channel's directory, which a pod does not get.
		return fmt.Sprintf("inject rules (for %v) need --backend docker in this version: a pod's channel has no directory to carry the proxy's CA to it (docs/egress-inject.md)", hosts)
	}
	return ""
}
