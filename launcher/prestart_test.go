package launcher

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
)

// jsDescriptors is a JavaScript program's line about itself, for a node started ahead
// (boot.py's _ahead; the image's node-main.js): whether it was (its parent is the
// sandbox's child, not PID 1); how many of its descriptors past 2 are a copy of 0 (the
// container's stdin, which a node started ahead keeps for code mode's replies), the
// stdin memory file, the mcptools one, or a pipe's end alone (the gate, the call pipe,
// the reply descriptor: node's own pipes come in pairs); and whether the gate's
// variable is gone. Each is held until the gate opens, and then kept only as node FILE
// would have it.
const jsDescriptors = `import * as fsd from "node:fs";
const links = fsd.readdirSync("/proc/self/fd").map(fd => [fd, (() => { try { return fsd.readlinkSync("/proc/self/fd/" + fd) } catch { return "" } })()]);
const zero = links.find(([fd]) => fd === "0")[1], mine = links.filter(([fd]) => +fd > 2).map(([, l]) => l);
const count = f => mine.filter(f).length;
console.log(process.ppid !== 1 ? "ahead" : "cold", count(l => l === zero), count(l => /memfd:stdin/.test(l)), count(l => /memfd:mcptools/.test(l)),
  count(l => l.startsWith("pipe:") && mine.indexOf(l) === mine.lastIndexOf(l)), "MCP_EXEC_AHEAD" in process.env);
`

// TestPoolPrestartNode: with Options.Prestart naming javascript a warm-pool sandbox's
// node was started ahead, from the image's snapshot, and waits for its program: it runs
// it as node FILE does (an ES module with top-level await, the caller's stdin), holds
// none of the descriptors a call without tools must not have, and, given tools (code
// mode), has the caller's stdin at descriptor 0 and calls its tools (imported or
// required); one killed by SIGKILL ends its call with 137; and a Python call in such a
// sandbox runs with no idle node left beside it.
func TestPoolPrestartNode(t *testing.T) {
	var e echoTools
	// What a node started after its code (cold) has: none of them but, with tools, the
	// mcptools module and the call and reply descriptors (the reply one is no pipe under
	// gVisor, where the container's stdin is none).
	cold := testLauncher(t, Options{})
	seen := map[bool]string{}
	for _, tools := range []*Tools{nil, e.tools(0)} {
		res, err := cold.Run(t.Context(), Job{Language: "javascript", Code: jsDescriptors, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		seen[tools != nil] = strings.Replace(res.Stdout, "cold", "ahead", 1)
	}
	if seen[false] != "ahead 0 0 0 0 false\n" || !strings.HasPrefix(seen[true], "ahead 0 0 1 ") {
		t.Fatalf("cold: got %q and, with tools, %q; want none of them and, with tools, one mcptools", seen[false], seen[true])
	}

	l := testLauncher(t, Options{PoolSize: 1, Prestart: []string{"javascript"}})
	for _, tc := range []struct {
		name string
		job  Job
		exit int
		out  string
	}{
		{"started ahead", Job{Language: "javascript", Code: jsDescriptors}, 0, seen[false]},
		{"module", Job{Language: "javascript", Code: "import { readFileSync } from 'node:fs';\nawait null;\nconsole.log(readFileSync(0, 'utf8').trim(), process.argv.length)", Stdin: "in\n"}, 0, "in 2\n"},
		{"tools", Job{Language: "javascript", Code: "import { echo } from 'mcptools';\nimport { readFileSync } from 'node:fs';\n" + jsDescriptors +
			"console.log(JSON.stringify(await echo.echo({ text: 'hi' })), JSON.stringify(readFileSync(0, 'utf8')))", Stdin: "the caller's\n", Tools: e.tools(0)},
			0, seen[true] + "{\"text\":\"hi\"} \"the caller's\\n\"\n"},
		{"tools, require", Job{Language: "javascript", Code: "const { echo } = require('mcptools');\necho.echo({ text: 'cjs' }).then(r => console.log(r.text))", Tools: e.tools(0)}, 0, "cjs\n"},
		{"killed", Job{Language: "javascript", Code: "console.log('x'); process.kill(process.pid, 'SIGKILL')"}, 137, "x\n"},
		{"python alone", Job{Code: "import os\nprint(sorted(open('/proc/%s/comm' % p).read().strip() for p in os.listdir('/proc') if p.isdigit()))"}, 0, "['python3', 'python3']\n"},
	} {
		res, err := l.Run(t.Context(), tc.job)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != tc.exit || res.Stdout != tc.out {
			t.Errorf("%s: got exit %d, stdout %q; want %d, %q (stderr %q)", tc.name, res.ExitCode, res.Stdout, tc.exit, tc.out, res.Stderr)
		}
	}
	if e.calls != 2 {
		t.Errorf("Serve called %d times, want 2", e.calls)
	}
}

// TestCheckLanguagesPrestart: with node to be started ahead in the warm pool, the
// start-up check passes on the image, and refuses, naming the image, one whose snapshot
// main cannot wait for its program (the main of the images built before it could, a
// one-liner that runs the program at once): boot.py starts no node ahead there, and
// the check's program sees it was started after its code.
func TestCheckLanguagesPrestart(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil || os.Getenv("MCP_EXEC_TEST_BACKEND") == "process" {
		if os.Getenv("CI") != "" && err != nil {
			t.Fatalf("docker CLI: %v", err)
		}
		t.Skipf("an image is built with the docker CLI (%v), for an engine's backend", err)
	}
	o := Options{PoolSize: 1, Prestart: []string{"javascript"}}
	langs := []string{LanguagePython, "javascript"}
	if _, err := testLauncher(t, o).CheckLanguages(t.Context(), langs); err != nil {
		t.Fatalf("the image: got %v, want nil", err)
	}

	o.Image = "mcp-exec-test/old-node-main:" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	base := enginetest.Image()
	if base == "" {
		base = DefaultImage
	}
	build := exec.CommandContext(t.Context(), docker, "build", "-q", "-t", o.Image, "-")
	build.Stdin = strings.NewReader("FROM " + base + `
USER root
RUN printf '%s\n' "require('v8').startupSnapshot.setDeserializeMainFunction(() => require('module').runMain());" > /usr/local/share/mcp-exec/node-main.js \
 && node --snapshot-blob /usr/local/share/mcp-exec/node.blob --build-snapshot /usr/local/share/mcp-exec/node-main.js
USER 65532:65532
`)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", o.Image, err, out)
	}
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", "-f", o.Image).Run() })
	_, err = testLauncher(t, o).CheckLanguages(t.Context(), langs)
	if !errors.Is(err, ErrPrestartMissing) || !strings.Contains(err.Error(), o.Image) {
		t.Errorf("an image whose node cannot wait: got %v, want ErrPrestartMissing naming it", err)
	}
}
