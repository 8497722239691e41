package upstream

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestJavaScriptForms: a tool's JavaScript call is what launcher/mcptools.mjs gives a
// program (a named export, one object of arguments, the optional ones marked "?"),
// and a module name mcptools.mjs keeps for itself is reached through its default
// export.
func TestJavaScriptForms(t *testing.T) {
	tool := catalogTool{Name: "look-up", Function: "look_up", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"verbose": map[string]any{"type": "boolean"}, "id": map[string]any{"type": "integer"}, "at": map[string]any{"type": "string"}},
		"required":   []any{"id"},
	}}
	for _, tt := range []struct{ module, want string }{
		{"records", "  JavaScript: import { records } from \"mcptools\"; await records.look_up({id, at?, verbose?})\n"},
		{"search", "  JavaScript: import mcptools from \"mcptools\"; await mcptools[\"search\"].look_up({id, at?, verbose?})\n"},
	} {
		if got := jsDoc(catalogServer{Name: "r", Module: tt.module}, tool); got != tt.want {
			t.Errorf("module %s: got %q, want %q", tt.module, got, tt.want)
		}
	}
	if got := jsDoc(catalogServer{Module: "records"}, catalogTool{Function: "ping"}); !strings.HasSuffix(got, "await records.ping({})\n") {
		t.Errorf("no arguments: got %q", got)
	}

	cfg, err := Parse([]byte(`{"mcpServers": {"records": {"command": "true", "tools": ["lookup"]}}}`), Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	m := New(cfg, "test", zerolog.Nop())
	py, js := m.Index(false), m.Index(true)
	if strings.Contains(py, "JavaScript") || !strings.Contains(py, "as Python functions") {
		t.Errorf("Index(false) names JavaScript:\n%s", py)
	}
	if !strings.Contains(js, "in JavaScript `import { records } from \"mcptools\"`, then `await records.<tool>({...})`") {
		t.Errorf("Index(true) lacks the JavaScript import:\n%s", js)
	}
	if extra := len(js) - len(py); extra > 160 {
		t.Errorf("the JavaScript form adds %d bytes to the index, want at most 160: it is in every tools/list", extra)
	}
}
