package probe

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

var testParams = Params{
	Memory: 256 << 20, Pids: 128, CPUs: 1, TmpfsSize: 64 << 20,
	CanaryName: "CANARY", CanaryValue: "canary-value", HostAddrs: []string{"192.0.2.1", "2001:db8::1"},
	Token: "t1",
}

// each calls f for every probe, of every language, and every Next of one.
func each(t *testing.T, f func(t *testing.T, p Probe)) {
	for _, p := range append(All(testParams), Languages(testParams, "bash", "javascript")...) {
		t.Run(p.Name, func(t *testing.T) {
			f(t, p)
			if p.Next != nil {
				t.Run("next", func(t *testing.T) { f(t, *p.Next) })
			}
		})
	}
}

func TestProbeDefinitions(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)
	seen := map[string]bool{}
	for _, p := range append(All(testParams), Languages(testParams, "bash", "javascript")...) {
		if seen[p.Name] {
			t.Errorf("duplicate probe name %q", p.Name)
		}
		seen[p.Name] = true
		if !snake.MatchString(p.Name) {
			t.Errorf("probe name %q is not snake_case", p.Name)
		}
		if p.AwaitRemoval && p.Next == nil {
			t.Errorf("%s: AwaitRemoval without Next", p.Name)
		}
	}
	each(t, func(t *testing.T, p Probe) {
		if p.Claim == "" || strings.Contains(p.Claim, "\n") {
			t.Errorf("claim %q: want one non-empty line", p.Claim)
		}
		if p.Check == nil {
			t.Fatal("no Check")
		}
		// The finish call, and the header's values, as each language writes them.
		finish, memory, token := "\nfinish()", "MEMORY = 268435456\n", `TOKEN = "mcpexecprobet1"`
		switch p.Job.Language {
		case "bash":
			finish, memory, token = "\nfinish\n", "MEMORY=268435456\n", "TOKEN='mcpexecprobet1'\n"
		case "javascript":
			finish, memory, token = "\nfinish();", "const MEMORY = 268435456;\n", `const TOKEN = "mcpexecprobet1";`
		}
		if !strings.Contains(p.Job.Code, finish) && !strings.Contains(p.Job.Code, "SPAWNED") {
			t.Errorf("the code never calls %q", strings.TrimSpace(finish))
		}
		if p.Job.Timeout <= 0 || p.Job.Timeout > 5*time.Minute {
			t.Errorf("timeout %v", p.Job.Timeout)
		}
		if !strings.Contains(p.Job.Code, memory) || !strings.Contains(p.Job.Code, token) {
			t.Error("the configured values are not in the code")
		}
	})
}

// TestProbeChecksRejectFailure feeds every Check a failing Result: no Check may be
// a tautology.
func TestProbeChecksRejectFailure(t *testing.T) {
	fails := map[string]launcher.Result{
		"probe fail":          {ExitCode: 1, Stdout: "PROBE FAIL: x\n"},
		"fail then ok":        {ExitCode: 0, Stdout: "PROBE FAIL: x\nPROBE OK\n"},
		"no output":           {ExitCode: 0},
		"ok but exit 1":       {ExitCode: 1, Stdout: "PROBE OK\n"},
		"ok but timed out":    {ExitCode: 137, Signal: 9, TimedOut: true, Stdout: "PROBE OK\n"},
		"ok not last":         {ExitCode: 0, Stdout: "PROBE OK\nmore\n"},
		"crash":               {ExitCode: 1, Stderr: "Traceback...\nValueError: x\n"},
		"killed without oom":  {ExitCode: 137, Signal: 9, Stdout: "ALLOCATING\n"},
		"oom but fail line":   {ExitCode: 137, Signal: 9, OOMKilled: true, Stdout: "PROBE FAIL: memory.limit_in_bytes = 1, want 2\nALLOCATING\n"},
		"oom before allocate": {ExitCode: 137, Signal: 9, OOMKilled: true, Stdout: "started\n"},
	}
	each(t, func(t *testing.T, p Probe) {
		for name, r := range fails {
			if err := p.Check(r); err == nil {
				t.Errorf("Check accepted a failing result (%s): %+v", name, r)
			}
		}
	})
}

// TestProbeChecksAcceptSuccess: what a passing run looks like is accepted, so that
// TestProbeChecksRejectFailure is not satisfied by a Check that rejects everything.
func TestProbeChecksAcceptSuccess(t *testing.T) {
	ok := launcher.Result{Stdout: "detail\nPROBE OK\n"}
	each(t, func(t *testing.T, p Probe) {
		r := ok
		switch p.Name {
		case "memory_limit_kills_program":
			r = launcher.Result{ExitCode: 137, Signal: 9, OOMKilled: true, Stdout: "ALLOCATING\n"}
		case "memory_oom_reported_for_child":
			r.OOMKilled = true
		case "bash_memory_limit", "javascript_memory_limit":
			r = launcher.Result{ExitCode: 137, Signal: 9, OOMKilled: true, Stdout: "ALLOCATING\n"}
		case "bash_timeout_kills_tree", "javascript_timeout_kills_tree":
			if p.AwaitRemoval {
				r = launcher.Result{ExitCode: 137, Signal: 9, TimedOut: true, Stdout: "SANDBOX-ID " + strings.Repeat("ab", 32) + "\nSPAWNED 2\n"}
			}
		case "daemon_not_persisted":
			if p.AwaitRemoval {
				r.Stdout = "DAEMON 10\nSANDBOX-ID " + strings.Repeat("ab", 32) + "\nPROBE OK\n"
			}
		}
		if err := p.Check(r); err != nil {
			t.Errorf("Check rejected a passing result %+v: %v", r, err)
		}
	})
	if err := Passed(launcher.Result{Stdout: "PROBE OK\n", OOMKilled: true}); err == nil {
		t.Error("Passed accepted an OOM-killed run")
	}
	if err := All(testParams)[len(All(testParams))-1].Check(ok); err == nil {
		t.Error("the daemon probe accepted a run without SANDBOX-ID")
	}
}

// TestLanguageProbes: every other language has its probe groups, written in it; the
// memory probe's Check follows the backend, and the tree probe's wants the timeout.
func TestLanguageProbes(t *testing.T) {
	groups := []string{"timeout_kills_tree", "network", "privileges", "filesystem", "pids_limit", "memory_limit"}
	for _, lang := range []string{"bash", "javascript"} {
		var names []string
		for _, p := range Languages(testParams, lang) {
			names = append(names, p.Name)
			if p.Job.Language != lang {
				t.Errorf("%s: language %q, want %q", p.Name, p.Job.Language, lang)
			}
		}
		var want []string
		for _, g := range groups {
			want = append(want, lang+"_"+g)
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("%s probes (-want +got):\n%s", lang, diff)
		}
	}
	// TypeScript's program is node: what it adds is esbuild, whose tree the one probe
	// starts (ts/tree_start.ts), with JavaScript's check.
	ts := Languages(testParams, "typescript")
	if len(ts) != 1 || ts[0].Name != "typescript_timeout_kills_tree" || ts[0].Job.Language != "typescript" ||
		!strings.Contains(ts[0].Job.Code, "spawn('esbuild'") || ts[0].Next == nil || !strings.Contains(ts[0].Next.Job.Code, "the previous run's child") {
		t.Errorf("typescript probes: got %d (%v), want the tree probe alone, with esbuild children and JavaScript's check", len(ts), ts)
	}
	if got := Languages(testParams, "python", "ruby"); len(got) != 0 {
		t.Errorf("python and ruby: got %d probes, want none (Python's are All's)", len(got))
	}

	byName := func(o Params, name string) Probe {
		for _, p := range Languages(o, "bash", "javascript") {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no probe %s", name)
		return Probe{}
	}
	killed := launcher.Result{ExitCode: 137, Signal: 9, OOMKilled: true, Stdout: "ALLOCATING\n"}
	refused := launcher.Result{ExitCode: 1, Stdout: "ALLOCATING\n", Stderr: "RangeError: Array buffer allocation failed\n"}
	process := testParams
	process.Process = true
	for _, tt := range []struct {
		o    Params
		r    launcher.Result
		pass bool
	}{
		{testParams, killed, true},
		{testParams, refused, false}, // a container's limit is the OOM kill
		{process, refused, true},
		{process, killed, true}, // the container's cgroup, shared with the server, came first
		{process, launcher.Result{ExitCode: 1, Stdout: "ALLOCATING\n", Stderr: "TypeError: x\n"}, false},
	} {
		err := byName(tt.o, "javascript_memory_limit").Check(tt.r)
		if (err == nil) != tt.pass {
			t.Errorf("process %v, %+v: got %v, want pass %v", tt.o.Process, tt.r, err, tt.pass)
		}
	}
	if err := byName(process, "bash_memory_limit").Check(launcher.Result{ExitCode: 2, Stdout: "ALLOCATING\n", Stderr: "bash: xrealloc: cannot allocate 536870912 bytes\n"}); err != nil {
		t.Errorf("bash's refused allocation on the process backend: %v", err)
	}

	tree := byName(testParams, "bash_timeout_kills_tree")
	spawned := "SANDBOX-ID " + strings.Repeat("ab", 32) + "\nSPAWNED 2\n"
	for name, r := range map[string]launcher.Result{
		"exited":         {ExitCode: 0, Stdout: spawned},
		"one child":      {ExitCode: 137, Signal: 9, TimedOut: true, Stdout: "SANDBOX-ID " + strings.Repeat("ab", 32) + "\nSPAWNED 1\n"},
		"no sandbox id":  {ExitCode: 137, Signal: 9, TimedOut: true, Stdout: "x\nSPAWNED 2\n"},
		"a failure seen": {ExitCode: 137, Signal: 9, TimedOut: true, Stdout: spawned + "PROBE FAIL: x\n"},
	} {
		if err := tree.Check(r); err == nil {
			t.Errorf("the tree probe accepted a run that %s", name)
		}
	}
	if tree.Next == nil || !tree.AwaitRemoval || tree.Next.Job.Language != "bash" {
		t.Errorf("the tree probe's second run: next %v, await removal %v", tree.Next != nil, tree.AwaitRemoval)
	}
}

func TestProbeVerdict(t *testing.T) {
	for _, tt := range []struct {
		stdout, want string
	}{
		{"PROBE OK\n", ""},
		{"a\nPROBE OK", ""},
		{"PROBE FAIL: the reason\n", "the reason"},
		{"x\nPROBE FAIL: a; b\n", "a; b"},
		{"", `no verdict: the last line of stdout is "", want "PROBE OK"`},
		{"PROBE OK\nx\n", `no verdict: the last line of stdout is "x", want "PROBE OK"`},
	} {
		err := Verdict(tt.stdout)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("Verdict(%q) = %q, want %q", tt.stdout, got, tt.want)
		}
	}
}

func TestProbeSandboxID(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	if got := SandboxID("DAEMON 3\nSANDBOX-ID " + id + "\nPROBE OK\n"); got != id {
		t.Errorf("got %q, want %q", got, id)
	}
	if got := SandboxID("SANDBOX-ID not-hex\n"); got != "" {
		t.Errorf("got %q, want none", got)
	}
}

func TestProbeParamsOf(t *testing.T) {
	p := ParamsOf(launcher.Options{Memory: 1, Pids: 2, CPUs: 0.5, TmpfsSize: 4})
	if p.Memory != 1 || p.Pids != 2 || p.CPUs != 0.5 || p.TmpfsSize != 4 {
		t.Errorf("ParamsOf: %+v", p)
	}
}

// TestProbeCodeCompiles compiles every probe's program with a local Python, when there
// is one, so that a syntax error shows here rather than as a sandbox failure.
func TestProbeCodeCompiles(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	var files []string
	each(t, func(t *testing.T, p Probe) {
		if p.Job.Language != "" {
			return // TestLanguageProbeCodeCompiles
		}
		f := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".py")
		if err := os.WriteFile(f, []byte(p.Job.Code), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	})
	// One interpreter for all: starting Python can be slow (pyenv shims).
	script := "import sys\nfor f in sys.argv[1:]:\n    try:\n        compile(open(f).read(), f, 'exec')\n    except SyntaxError as e:\n        print(e)\n"
	out, err := exec.Command(py, append([]string{"-c", script}, files...)...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("probe programs do not compile: %v\n%s", err, out)
	}
}

// TestLanguageProbeCodeCompiles checks the other languages' programs with a local bash
// (-n) and node (--check, as an ES module), when there are.
func TestLanguageProbeCodeCompiles(t *testing.T) {
	for lang, cmd := range map[string][]string{"bash": {"bash", "-n"}, "javascript": {"node", "--check"}} {
		bin, err := exec.LookPath(cmd[0])
		if err != nil {
			t.Logf("no %s: %s's probes not compiled", cmd[0], lang)
			continue
		}
		dir := t.TempDir()
		for _, p := range Languages(testParams, lang) {
			jobs := []launcher.Job{p.Job}
			if p.Next != nil {
				jobs = append(jobs, p.Next.Job)
			}
			for i, job := range jobs {
				f := filepath.Join(dir, fmt.Sprintf("%s_%d.mjs", p.Name, i))
				if err := os.WriteFile(f, []byte(job.Code), 0o600); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command(bin, cmd[1], f).CombinedOutput(); err != nil {
					t.Errorf("%s (run %d) does not compile: %v\n%s", p.Name, i+1, err, out)
				}
			}
		}
	}
}
