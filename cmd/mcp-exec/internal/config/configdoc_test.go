package config

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

const configDocPath = "../../../../docs/configuration.md"

var updateConfigDoc = flag.Bool("update-config-doc", false, "rewrite docs/configuration.md's settings table (go generate ./cmd/mcp-exec)")

// TestConfigDocCurrent: docs/configuration.md's settings table is what configDoc
// writes from the table of settings; -update-config-doc (go generate) rewrites it.
func TestConfigDocCurrent(t *testing.T) {
	page, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := configDoc(page)
	if err != nil {
		t.Fatal(err)
	}
	if *updateConfigDoc {
		if err := os.WriteFile(configDocPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(page, want) {
		t.Errorf("docs/configuration.md is stale: its settings table differs from the table of settings in config.go; run go generate ./cmd/mcp-exec")
	}
}
