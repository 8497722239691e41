package e2e_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// TestEgressE2E runs the binary with --egress-profiles (as MCP_EXEC_EGRESS_PROFILES):
// exec offers egress as the enum of the profiles' names; a call with a profile gets
// the proxy (which refuses a host the profile does not name, with the reason), a call
// without gets no network and no proxy, an unknown name is refused, and the caller's
// data is nowhere in the server's log. The channel directory an earlier run of the
// instance left is gone once it serves. Under a runtime that does not let the channel
// through (gVisor without --host-uds=open, MCP_EXEC_TEST_RUNTIME=runsc), the server
// must refuse to start, naming the flag and the setting. The live tests of
// launcher/egress/proxy cover the allowed paths against a real public host.
func TestEgressE2E(t *testing.T) {
	bin := e2e.Build(t)
	profiles := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(profiles, []byte(`{"profiles": {"deb": {"hosts": ["deb.debian.org"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const instance = "test-egress-e2e"
	sockets := filepath.Join(t.TempDir(), "sockets")
	stale := filepath.Join(sockets, proxy.DirPrefix(instance)+"1234")
	if err := os.MkdirAll(stale, 0o711); err != nil {
		t.Fatal(err)
	}
	env := e2e.Env("MCP_EXEC_POOL_SIZE=1", "MCP_EXEC_EGRESS_PROFILES="+profiles, "MCP_EXEC_EGRESS_DIR="+sockets)
	token := e2e.Random()
	if runtime := os.Getenv("MCP_EXEC_TEST_RUNTIME"); !launchertest.HostUDS(t, runtime) {
		_, err := e2e.StartServer(t, bin, env, "http", instance, token)
		var se *e2e.StartError
		if !errors.As(err, &se) || se.ExitCode != 1 ||
			!strings.Contains(se.Logs, "--egress-profiles (MCP_EXEC_EGRESS_PROFILES): a sandbox cannot reach its egress channel under gVisor") ||
			!strings.Contains(se.Logs, "--host-uds=open") || !strings.Contains(se.Logs, "--runtime (MCP_EXEC_RUNTIME)") {
			t.Fatalf("under runtime %q, without --host-uds: got %v, want the server to refuse naming --host-uds=open and --runtime", runtime, err)
		}
		return
	}
	srv := e2e.Serve(t, bin, env, "http", instance, token)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the earlier run's channel directory %s is still there: %v", stale, err)
	}
	cs := srv.Connect(t, nil, nil)

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := json.Marshal(tools.Tools[0].InputSchema)
	var in struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &in); err != nil {
		t.Fatal(err)
	}
	if got := in.Properties["egress"].Enum; !slices.Equal(got, []string{"deb"}) {
		t.Fatalf("egress enum: got %q, want [deb] (schema %s)", got, schema)
	}

	canary := "CANARY-" + e2e.Random()
	code := `
import os, sys, urllib.request
print("proxy", os.environ.get("HTTPS_PROXY"), os.path.exists("/egress/proxy.sock"))
try:
    urllib.request.urlopen("https://example.com/" + sys.stdin.read(), timeout=20)
except Exception as e:
    print("denied", e)
`
	call := func(args map[string]any) (string, bool) {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	out, isErr := call(map[string]any{"code": code, "stdin": canary, "egress": "deb"})
	if isErr || !strings.Contains(out, "proxy http://127.0.0.1:3128 True") ||
		!strings.Contains(out, `denied <urlopen error Tunnel connection failed: 403 egress denied (host_not_allowed) "example.com" port 443: not in profile "deb">`) {
		t.Errorf("with a profile: %s", out)
	}
	out, isErr = call(map[string]any{"code": code, "stdin": canary})
	if isErr || !strings.Contains(out, "proxy None False") || strings.Contains(out, "403") {
		t.Errorf("without a profile: %s", out)
	}
	if out, isErr = call(map[string]any{"code": code, "egress": "pypi"}); !isErr || !strings.Contains(out, "egress") {
		t.Errorf("unknown profile: isError %v, %s", isErr, out)
	}
	logs := srv.Logs.String()
	if !strings.Contains(logs, `"host":"","host_redacted":true,"port":443,"decision":"denied","reason":"host_not_allowed"`) {
		t.Errorf("server log lacks the proxy's line:\n%s", logs)
	}
	if strings.Contains(logs, canary) || strings.Contains(logs, "example.com") {
		t.Errorf("server log holds the caller's data:\n%s", logs)
	}
}
