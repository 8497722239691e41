package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

var testParams = Params{
	Memory: 256 << 20, Pids: 128, CPUs: 1, TmpfsSize: 64 << 20,
	CanaryName: "CANARY", CanaryValue: "canary-value", HostAddrs: []string{"192.0.2.1", "2001:db8::1"},
	Token: "t1",
}

// each calls f for every probe and every Next of one.
func each(t *testing.T, f func(t *testing.T, p Probe)) {
	for _, p := range All(testParams) {
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
	for _, p := range All(testParams) {
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
		if !strings.Contains(p.Job.Code, "finish()") {
			t.Error("the code never calls finish()")
		}
		if p.Job.Timeout <= 0 || p.Job.Timeout > 5*time.Minute {
			t.Errorf("timeout %v", p.Job.Timeout)
		}
		if !strings.Contains(p.Job.Code, "MEMORY = 268435456\n") || !strings.Contains(p.Job.Code, `TOKEN = "mcpexecprobet1"`) {
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
