package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// saUpstreams is an upstreams file with a secret from the environment in a url
// server's header and in a command server's env, one from a file, and a ${env:}
// in args, which is not resolved (so not a secret taken from the environment).
const saUpstreams = `{"mcpServers": {
  "gh": {"url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${env:SA_GH_TOKEN}"}, "tools": ["search_*"]},
  "fs": {"command": "/usr/local/bin/fs-mcp", "args": ["${env:NOT_RESOLVED}"],
         "env": {"API_KEY": "${env:SA_FS_KEY}", "OTHER": "${file:/nonexistent/fs-key}"}, "tools": ["read_file"]}
}}`

func saUpstreamsFile(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "upstreams.json")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestProcessBackendRefusesUpstreams: with the process
// backend, code mode is refused at start, naming why and the backends to use instead;
// each ${env:NAME} the upstreams file resolves is named as a secret programs could
// read, never with its value. The same file is accepted on the docker backend.
func TestProcessBackendRefusesUpstreams(t *testing.T) {
	cfgStubHostname(t)
	const secret = "ghp_secretvalue0123456789"
	t.Setenv("SA_GH_TOKEN", secret)
	t.Setenv("SA_FS_KEY", secret+"fs")
	file := saUpstreamsFile(t, strings.Replace(saUpstreams, `, "OTHER": "${file:/nonexistent/fs-key}"`, "", 1))

	if _, err := cfgLoad(nil, map[string]string{"MCP_EXEC_UPSTREAMS": file}); err != nil {
		t.Fatalf("docker backend with the upstreams file: %v", err)
	}
	_, err := cfgLoad(nil, map[string]string{"MCP_EXEC_BACKEND": "process", "MCP_EXEC_UPSTREAMS": file})
	if err == nil {
		t.Fatal("process backend with --upstreams: no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"--upstreams (MCP_EXEC_UPSTREAMS) is refused with the process backend (standalone mode)",
		"/proc/<pid>/environ", "/proc/<pid>/fd/0", "outside the allowlist",
		"--backend docker (Docker or Podman) or kubernetes",
		"takes SA_GH_TOKEN from the environment (${env:SA_GH_TOKEN})",
		"takes SA_FS_KEY from the environment (${env:SA_FS_KEY})",
		"keep SA_GH_TOKEN out of this container's environment", "${file:/path}",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, secret) || strings.Contains(msg, "NOT_RESOLVED") {
		t.Errorf("the refusal shows a secret's value, or names an unresolved reference:\n%s", msg)
	}

	// Without a reference to the environment, code mode is refused all the same.
	plain := saUpstreamsFile(t, `{"mcpServers": {"gh": {"url": "https://api.example/mcp", "tools": ["search_*"]}}}`)
	_, err = cfgLoad([]string{"--backend", "process", "--upstreams", plain}, nil)
	if err == nil || !strings.Contains(err.Error(), "--upstreams (MCP_EXEC_UPSTREAMS) is refused") || strings.Contains(err.Error(), "from the environment") {
		t.Errorf("process backend, an upstreams file without ${env:}: got %v, want the refusal of code mode alone", err)
	}
	if _, err := cfgLoad([]string{"--backend", "process"}, nil); err != nil {
		t.Errorf("process backend without upstreams: %v", err)
	}
}

// TestProcessBackendRefusesMetricsListener: programs share the standalone server's
// network, so a metrics listener without authentication is refused there.
func TestProcessBackendRefusesMetricsListener(t *testing.T) {
	cfgStubHostname(t)
	_, err := cfgLoad([]string{"--backend", "process", "--metrics-addr", "127.0.0.1:9090"}, nil)
	if err == nil || !strings.Contains(err.Error(), `--metrics-addr (MCP_EXEC_METRICS_ADDR) "127.0.0.1:9090" is refused with the process backend`) {
		t.Errorf("process backend with a metrics listener: got %v, want the refusal", err)
	}
	for _, addr := range []string{"", "off"} {
		if _, err := cfgLoad([]string{"--backend", "process", "--metrics-addr", addr}, nil); err != nil {
			t.Errorf("process backend, --metrics-addr %q: %v", addr, err)
		}
	}
	if _, err := cfgLoad([]string{"--metrics-addr", "127.0.0.1:9090"}, nil); err != nil {
		t.Errorf("docker backend with a metrics listener: %v", err)
	}
}

// TestUpstreamEnvRefs: the variables an upstreams file resolves from the environment
// (env and headers values), found without reading them or the ${file:} files.
func TestUpstreamEnvRefs(t *testing.T) {
	got := upstreamEnvRefs(saUpstreamsFile(t, saUpstreams))
	if diff := cmp.Diff([]string{"SA_FS_KEY", "SA_GH_TOKEN"}, got); diff != "" {
		t.Errorf("upstreamEnvRefs (-want +got):\n%s", diff)
	}
	if got := upstreamEnvRefs(filepath.Join(t.TempDir(), "missing.json")); len(got) != 0 {
		t.Errorf("a missing file: got %v, want none", got)
	}
}
