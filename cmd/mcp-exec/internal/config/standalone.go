package config

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// cfgStandalone is what Validate refuses with the process backend (standalone mode)
// beyond the locks: whatever would put a secret, an upstream or an unauthenticated
// listener within the programs' reach. Programs run as the server's user, and the container's environment reaches
// every process started in it besides the server (the image's healthcheck, docker
// exec, kubectl exec), dumpable ones among them: a program scanning /proc/*/environ
// finds a secret there in the healthcheck's processes, caught before their
// non-dumpable init runs (a busy CPU makes that window long). So the whole
// environment counts as the programs': no secret may come from it. The
// server's secret-bearing settings are the token (MCP_EXEC_AUTH_TOKEN) and the
// upstreams file's ${env:NAME} references; OAuth has no client secret.
func cfgStandalone(c Config) []error {
	if c.Backend != "process" {
		return nil
	}
	var errs []error
	if c.AuthToken.Set() && c.AuthTokenFile == "" {
		errs = append(errs, fmt.Errorf("%s is refused with the process backend (standalone mode): programs run as the server's user and can read the container's environment in any process that inherits it (the healthcheck, docker exec, kubectl exec); set %s to the token's SHA-256 instead (the server never holds the token), or pass the token in a file the server can remove, %s",
			AuthTokenEnv, Name("auth-token-sha256"), Name("auth-token-file")))
	}
	// Programs share the server's network namespace here: a listener without
	// authentication is theirs to ask.
	if c.MetricsAddr != "" && c.MetricsAddr != "off" {
		errs = append(errs, fmt.Errorf("%s %q is refused with the process backend (standalone mode): programs share the server's network, so a listener without authentication answers them too; leave it empty (/metrics on the MCP listener, behind its authentication) or off",
			Name("metrics-addr"), c.MetricsAddr))
	}
	if c.Upstreams == "" {
		return errs
	}
	// A command upstream is a child of the server, as the programs' user, dumpable,
	// without the runs' seccomp filter and rlimits: a program read its environment and
	// wrote a tools/call outside the allowlist to its /proc/<pid>/fd/0, which it ran;
	// and the sweep after every run killed it.
	errs = append(errs, fmt.Errorf("%s is refused with the process backend (standalone mode): code mode's upstreams would run beside the programs as their own user (a command upstream as the server's child, dumpable, without the runs' seccomp filter and rlimits), so a program could read an upstream's secrets (its /proc/<pid>/environ, the ${file:} files) and write tool calls outside the allowlist to its stdin (/proc/<pid>/fd/0), bypassing the allowlist, approvals, budget and log; and the sweep after every run would kill it. Use code mode with --backend docker (Docker or Podman) or kubernetes, where programs never reach the server's container",
		Name("upstreams")))
	for _, name := range upstreamEnvRefs(c.Upstreams) {
		errs = append(errs, fmt.Errorf("%s takes %s from the environment (${env:%s}): with the process backend (standalone mode) the container's environment is readable by programs (every process started in the container inherits it, the healthcheck and docker exec among them, and a program reads their /proc/<pid>/environ), so a secret there is theirs: keep %s out of this container's environment, and give upstream secrets as files (${file:/path}, on a mount only the server's container has) to a server on the docker or kubernetes backend",
			Name("upstreams"), name, name, name))
	}
	return errs
}

// upstreamEnvRefs lists the variables the upstreams file at path references with
// ${env:NAME} where it resolves them (env and headers values), sorted, without
// reading either the variables or the ${file:} files. A file that does not parse
// yields what was found before the error (the error itself is the upstreams check's).
func upstreamEnvRefs(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	_, _ = upstream.Parse(data, upstream.Resolver{
		LookupEnv: func(name string) (string, bool) { seen[name] = true; return "", true },
		ReadFile:  func(string) ([]byte, error) { return nil, nil },
	})
	return slices.Sorted(maps.Keys(seen))
}
