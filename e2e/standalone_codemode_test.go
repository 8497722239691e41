package e2e_test

// Issue 40, items 1 and 2, against the real image started with the docs' docker run
// line (saLocked): code mode's upstreams would run beside the programs as their user,
// and the container's environment is readable by programs (the healthcheck's
// /proc/<pid>/environ), so the server refuses both at start.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// saMountUpstreams writes content as upstreams.json in a directory of the test's own
// and returns the docker run flags that mount it read-only (a mount the start-up
// check accepts) and point MCP_EXEC_UPSTREAMS at it.
func saMountUpstreams(t *testing.T, content string) []string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "upstreams.json"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	return []string{"-v", dir + ":/etc/mcp-exec:ro", "-e", "MCP_EXEC_UPSTREAMS=/etc/mcp-exec/upstreams.json"}
}

// saRefusedAtLoad starts the image and wants the configuration refused (exit 2) before
// any lock is checked or anything served, with every want in stderr and none of the
// secrets.
func saRefusedAtLoad(t *testing.T, img string, flags []string, want, secrets []string) {
	t.Helper()
	code, stderr, err := saRun(t, img, flags, nil)
	if code != 2 || strings.Contains(stderr, "backend ready") || strings.Contains(stderr, "standalone lockdown verified") {
		t.Errorf("got exit %d (%v), want a refusal of the configuration (exit 2) before the lockdown and any serving:\n%s", code, err, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("the refusal lacks %q:\n%s", w, stderr)
		}
	}
	for _, s := range secrets {
		if strings.Contains(stderr, s) {
			t.Errorf("the refusal shows a secret's value:\n%s", stderr)
		}
	}
}

// TestStandaloneRefusesCodeMode (item 1): a command upstream would be the server's
// child, as the programs' user and dumpable: a program read its environment and wrote
// a tools/call outside the allowlist to its /proc/<pid>/fd/0. The docs' line with an
// upstreams file (a command upstream and a url one, no secret) is refused, naming why
// and the backends to use. Before, it started.
func TestStandaloneRefusesCodeMode(t *testing.T) {
	img := saImage(t)
	flags := append(append([]string(nil), saLocked...), saMountUpstreams(t, `{"mcpServers": {
  "tools": {"command": "/usr/bin/python3", "args": ["-c", "import time; time.sleep(60)"], "tools": ["echo"]},
  "gh": {"url": "http://127.0.0.1:9/mcp", "tools": ["search_*"]}
}}`)...)
	saRefusedAtLoad(t, img, flags, []string{
		"--upstreams (MCP_EXEC_UPSTREAMS) is refused with the process backend (standalone mode)",
		"/proc/<pid>/fd/0", "--backend docker (Docker or Podman) or kubernetes",
	}, nil)
}

// TestStandaloneRefusesSecretsFromEnvironment (item 2): over HTTP, with an upstream
// header "Bearer ${env:GH_TOKEN}", a program found GH_TOKEN in the /proc/<pid>/environ
// of the healthcheck's processes. The docs' line serving HTTP (egress stated denied,
// the token as its SHA-256) with GH_TOKEN in the container's environment and referenced
// by the upstreams file (a url server's header, a command server's env) is refused,
// naming each variable and saying to use a file, never printing a value. Before, it
// served.
func TestStandaloneRefusesSecretsFromEnvironment(t *testing.T) {
	img := saImage(t)
	gh, key := "ghp_"+e2e.Random(), e2e.Random()
	flags := append(append([]string(nil), saLocked...),
		"-e", "MCP_EXEC_TRANSPORT=http", "-e", "MCP_EXEC_STANDALONE_EGRESS_DENIED=true",
		"-e", "MCP_EXEC_AUTH_TOKEN_SHA256="+tokenSHA256(e2e.Random()),
		"-e", "GH_TOKEN="+gh, "-e", "FS_KEY="+key)
	flags = append(flags, saMountUpstreams(t, `{"mcpServers": {
  "gh": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${env:GH_TOKEN}"}, "tools": ["search_*"]},
  "fs": {"command": "/usr/bin/python3", "args": ["-c", "import time; time.sleep(60)"], "env": {"API_KEY": "${env:FS_KEY}"}, "tools": ["read_file"]}
}}`)...)
	saRefusedAtLoad(t, img, flags, []string{
		"--upstreams (MCP_EXEC_UPSTREAMS) takes GH_TOKEN from the environment (${env:GH_TOKEN})",
		"--upstreams (MCP_EXEC_UPSTREAMS) takes FS_KEY from the environment (${env:FS_KEY})",
		"keep GH_TOKEN out of this container's environment", "${file:/path}",
	}, []string{gh, key})
}
