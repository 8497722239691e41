package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// TestTenMiBRequest: a 10 MiB call is refused with a tool error naming the limit, the
// runner never sees it, and the session keeps serving.
func TestTenMiBRequest(t *testing.T) {
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{})
	big, _ := json.Marshal(map[string]string{"code": strings.Repeat("x", 10<<20)})
	res := call(t, t.Context(), cs, string(big))
	if !res.IsError || !strings.Contains(text(t, res), "limit is 1048576 bytes") {
		t.Errorf("10 MiB code: got isError %v, %q; want a tool error naming the limit", res.IsError, text(t, res))
	}
	if n := len(r.calls()); n != 0 {
		t.Errorf("runner calls: got %d, want 0", n)
	}
	r.set(launcher.Result{Stdout: "ok\n"}, nil)
	if res := call(t, t.Context(), cs, `{"code":"print(1)"}`); res.IsError {
		t.Errorf("call after the big one: got isError, want a result")
	}
}
