package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLibrariesNameNoVariable: outside this package's table, no library's code spells
// an MCP_EXEC_ variable; a library names a setting by flag (backend.Setting) and the
// command's Vars adds the variable. Allowed: the sandbox's protocol variable
// (backend.EgressTunnelEnv, not configuration) and the test environment read by the
// test-support packages launchertest and enginetest.
func TestLibrariesNameNoVariable(t *testing.T) {
	allowed := map[string]string{
		"launcher/backend/backend.go": `const EgressTunnelEnv = "MCP_EXEC_EGRESS=tunnel"`,
	}
	root := "../../../.."
	for _, dir := range []string{"launcher", "mcpserver"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if strings.HasPrefix(rel, "launcher/launchertest/") || strings.HasPrefix(rel, "launcher/enginetest/") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(data), "\n") {
				if !strings.Contains(line, "MCP_EXEC_") {
					continue
				}
				if ok, found := allowed[rel]; found && (ok == "" || strings.Contains(line, ok)) {
					continue
				}
				t.Errorf("%s:%d names a variable: %s", rel, i+1, strings.TrimSpace(line))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
