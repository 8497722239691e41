package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// TestEgressInjectE2E runs the binary with an inject rule whose value comes from its
// environment, and --egress-audit: a call with the profile gets the CA bundle and the
// variables that point at it, the audit file gets its line, and the secret is in no
// output, log or audit line. Whether the request itself gets through depends on this
// machine's DNS (here every public name resolves to a gateway at a refused address, so
// the proxy refuses it); the live tests of launcher/egress/proxy show the injection
// against a server of their own.
func TestEgressInjectE2E(t *testing.T) {
	if runtime := os.Getenv("MCP_EXEC_TEST_RUNTIME"); !launchertest.HostUDS(t, runtime) {
		t.Skipf("runtime %q does not let the channel through (TestEgressE2E checks the refusal)", runtime)
	}
	bin := e2e.Build(t)
	dir := t.TempDir()
	profiles := filepath.Join(dir, "egress.json")
	if err := os.WriteFile(profiles, []byte(`{"profiles": {"deb": {"hosts": ["deb.debian.org"],
	  "inject": {"deb.debian.org": {"headers": {"Authorization": "Bearer ${env:E2E_INJECT_TOKEN}"}}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := "SECRET-" + e2e.Random()
	audit := filepath.Join(dir, "audit.jsonl")
	env := e2e.Env("MCP_EXEC_POOL_SIZE=1", "MCP_EXEC_EGRESS_PROFILES="+profiles, "MCP_EXEC_EGRESS_DIR="+filepath.Join(dir, "s"),
		"MCP_EXEC_EGRESS_AUDIT="+audit, "E2E_INJECT_TOKEN="+secret)
	srv := e2e.Serve(t, bin, env, "http", "test-egress-inject-e2e", e2e.Random())
	cs := srv.Connect(t, nil, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"egress": "deb", "code": `
import os, urllib.request
b = os.environ.get("SSL_CERT_FILE")
print("bundle", b, os.environ.get("REQUESTS_CA_BUNDLE") == b, open(b).read().count("BEGIN CERTIFICATE") > 1, "PRIVATE" in open(b).read())
print("env", dict(os.environ))
try:
    with urllib.request.urlopen("https://deb.debian.org/debian/", timeout=20) as r:
        print("get", r.status)
except Exception as e:
    print("get", e)
`}})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Content[0].(*mcp.TextContent).Text
	if res.IsError || !strings.Contains(out, "bundle /egress/ca-bundle.pem True True False") {
		t.Errorf("with an inject profile: %s", out)
	}
	a, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("audit: %s", a)
	logs := srv.Logs.String()
	if !strings.Contains(string(a), `"event":"connection","profile":"deb"`) || !strings.Contains(string(a), `"host":"deb.debian.org"`) {
		t.Errorf("audit file lacks the connection:\n%s", a)
	}
	if !strings.Contains(logs, `"inject_hosts":["deb.debian.org"]`) {
		t.Errorf("server log lacks the injected hosts at start:\n%s", logs)
	}
	for what, s := range map[string]string{"output": out, "log": logs, "audit": string(a)} {
		if strings.Contains(s, secret) {
			t.Errorf("the secret is in the %s", what)
		}
	}
}
