package launcher_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mcp-exec/mcp-exec/"

// backends are the packages that run sandboxes: each depends on launcher/backend (the
// seam) and on helpers of its own (launcher/engine for docker), never on another
// backend or on the launcher, which reaches them through its Backend interface only.
var backends = []string{"launcher/docker", "launcher/kube", "launcher/process"}

// TestImportRules keeps the layering (the non-test dependencies, transitively, as
// go list -deps reports them): no backend imports another backend or the launcher; the
// launcher imports no backend; mcpserver and its packages import no backend;
// launcher/backend imports nothing of this module.
func TestImportRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], module) {
			deps[strings.TrimPrefix(f[0], module)] = f[1:]
		}
	}
	if len(deps) < 10 {
		t.Fatalf("go list named %d packages of the module: %q", len(deps), out)
	}
	forbid := func(pkg string, bad ...string) {
		for _, d := range deps[pkg] {
			if slices.Contains(bad, strings.TrimPrefix(d, module)) {
				t.Errorf("%s depends on %s", pkg, strings.TrimPrefix(d, module))
			}
		}
	}
	for _, b := range backends {
		if _, ok := deps[b]; !ok {
			t.Fatalf("no package %s: update the list of backends", b)
		}
		forbid(b, append(slices.DeleteFunc(slices.Clone(backends), func(o string) bool { return o == b }), "launcher")...)
	}
	for pkg := range deps {
		if pkg == "launcher" || pkg == "mcpserver" || strings.HasPrefix(pkg, "mcpserver/") {
			forbid(pkg, backends...)
		}
	}
	for _, d := range deps["launcher/backend"] {
		if strings.HasPrefix(d, module) {
			t.Errorf("launcher/backend depends on %s: it is the seam, the standard library only", d)
		}
	}
}
