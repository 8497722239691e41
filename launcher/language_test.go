package launcher

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLanguagePrograms is the contract battery for the languages besides Python
// (Job.Language): boot.py's child does the set-up every program gets, then execs bash
// or node on the code. Each row holds for the language as it does for Python
// (TestRunPrograms, TestFilesInAndOut).
func TestLanguagePrograms(t *testing.T) {
	bothWays(t, Options{MaxOutputBytes: 64 << 10}, languagePrograms)
}

func languagePrograms(t *testing.T, l *Launcher) {
	// Larger than one argument may be (MAX_ARG_STRLEN, 128 KiB): the code travels in a
	// memory file, not on the interpreter's command line.
	bigComment := strings.Repeat("# padding\n", 20000)
	tests := []struct {
		name      string
		job       Job
		wantExit  int
		wantOut   string // exact stdout
		wantErr   string // substring of stderr
		wantTrunc bool
		wantFile  string // name=content of a returned file
	}{
		{name: "bash hello", job: Job{Language: "bash", Code: "echo hello; echo oops >&2"}, wantOut: "hello\n", wantErr: "oops"},
		{name: "bash stdin", job: Job{Language: "bash", Code: "tr a-z A-Z", Stdin: "abc\n"}, wantOut: "ABC\n"},
		{name: "bash stdin absent", job: Job{Language: "bash", Code: "wc -c"}, wantOut: "0\n"},
		{name: "bash exit code", job: Job{Language: "bash", Code: "echo before; exit 7"}, wantExit: 7, wantOut: "before\n"},
		{name: "bash -e stops at a failure", job: Job{Language: "bash", Code: "false\necho not reached"}, wantExit: 1},
		{name: "bash pipefail", job: Job{Language: "bash", Code: "ls /nonexistent | cat\necho not reached"}, wantExit: 2, wantErr: "No such file"},
		{name: "bash command not found", job: Job{Language: "bash", Code: "nosuchcommand"}, wantExit: 127, wantErr: "nosuchcommand"},
		// Python ignores SIGPIPE; the interpreter it execs must not inherit that, or a
		// writer into a closed pipe would not die of it (141) but see EPIPE (1).
		{name: "bash SIGPIPE default", job: Job{Language: "bash", Code: "set +e\nyes | head -n1 >/dev/null\necho ${PIPESTATUS[@]}"}, wantOut: "141 0\n"},
		{name: "bash tools", job: Job{Language: "bash", Code: `echo '{"a":[1,2,3]}' | jq -c '.a|add'; sqlite3 :memory: 'select 6*7'; printf hi | gzip | gzip -d; echo; printf x | xz | xz -d; echo; file -b /bin/bash | cut -d, -f1; zip -q /tmp/z.zip /etc/hostname && unzip -l /tmp/z.zip | grep -c hostname; command -v curl`}, wantOut: "6\n42\nhi\nx\nELF 64-bit LSB pie executable\n1\n/usr/bin/curl\n"},
		{name: "bash big code", job: Job{Language: "bash", Code: bigComment + "echo big"}, wantOut: "big\n"},
		{name: "bash unicode", job: Job{Language: "bash", Code: "echo 'héllo ✓ 日本'"}, wantOut: "héllo ✓ 日本\n"},
		{name: "bash flood", job: Job{Language: "bash", Code: "head -c 300000 /dev/zero | tr '\\0' x; echo done >&2"}, wantTrunc: true},
		{name: "bash files in and out", job: Job{Language: "bash", Files: []File{{Name: "data/in.csv", Data: []byte("x\n1\n2\n3\n")}},
			Code: "awk 'NR > 1 {s += $1} END {printf \"%d\", s}' data/in.csv > /tmp/outputs/sum.txt"}, wantFile: "sum.txt=6"},
		{name: "bash no network", job: Job{Language: "bash", Code: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; curl -sS --max-time 3 http://1.1.1.1/ || echo refused $?"}, wantOut: "lo\nrefused 7\n", wantErr: "curl: (7)"},
		{name: "bash read-only root", job: Job{Language: "bash", Code: "touch /usr/x 2>/dev/null || echo ro"}, wantOut: "ro\n"},
		{name: "bash no capabilities", job: Job{Language: "bash", Code: "grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status | cut -f2 | sort -u; id -u"}, wantOut: "0000000000000000\n65532\n"},
		// The bootstrap's seccomp filter and no-new-privileges survive the exec.
		{name: "bash seccomp filter", job: Job{Language: "bash", Code: "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | tr -d '\\t'"}, wantOut: "NoNewPrivs:1\nSeccomp:2\n"},
		{name: "bash background child left running", job: Job{Language: "bash", Code: "sleep 600 &\necho started"}, wantOut: "started\n"},

		{name: "javascript hello", job: Job{Language: "javascript", Code: "console.log('hello'); console.error('oops')"}, wantOut: "hello\n", wantErr: "oops"},
		{name: "javascript top-level await", job: Job{Language: "javascript", Code: "const x = await new Promise(r => setTimeout(() => r(42), 10));\nconsole.log(x)"}, wantOut: "42\n"},
		{name: "javascript import", job: Job{Language: "javascript", Code: "import { readFileSync } from 'node:fs';\nprocess.stdout.write(readFileSync(0, 'utf8').toUpperCase())", Stdin: "abc\n"}, wantOut: "ABC\n"},
		{name: "javascript require", job: Job{Language: "javascript", Code: "const os = require('os'); console.log(os.userInfo().uid)"}, wantOut: "65532\n"},
		{name: "javascript exit code", job: Job{Language: "javascript", Code: "process.exitCode = 3"}, wantExit: 3},
		{name: "javascript exception", job: Job{Language: "javascript", Code: "\nthrow new Error('boom')"}, wantExit: 1, wantErr: "Error: boom"},
		{name: "javascript unhandled rejection", job: Job{Language: "javascript", Code: "Promise.reject(new Error('nope'))"}, wantExit: 1, wantErr: "nope"},
		{name: "javascript syntax error", job: Job{Language: "javascript", Code: "let = ;"}, wantExit: 1, wantErr: "SyntaxError"},
		{name: "javascript big code", job: Job{Language: "javascript", Code: strings.Repeat("// padding\n", 20000) + "console.log('big')"}, wantOut: "big\n"},
		{name: "javascript flood", job: Job{Language: "javascript", Code: "process.stdout.write('x'.repeat(300000))"}, wantTrunc: true},
		{name: "javascript files in and out", job: Job{Language: "javascript", Files: []File{{Name: "data/in.csv", Data: []byte("x\n1\n2\n3\n")}},
			Code: "import fs from 'node:fs';\nconst s = fs.readFileSync('data/in.csv', 'utf8').trim().split('\\n').slice(1).map(Number).reduce((a, b) => a + b);\nfs.writeFileSync('/tmp/outputs/sum.txt', String(s))"}, wantFile: "sum.txt=6"},
		{name: "javascript no network", job: Job{Language: "javascript", Code: "import net from 'node:net';\nconst s = net.connect(80, '1.1.1.1');\ns.on('error', e => console.log(e.code))"}, wantOut: "ENETUNREACH\n"},
		{name: "javascript read-only root", job: Job{Language: "javascript", Code: "import fs from 'node:fs';\ntry { fs.writeFileSync('/usr/x', 'x') } catch (e) { console.log(['EROFS', 'EACCES'].includes(e.code) ? 'refused' : e.code) }"}, wantOut: "refused\n"},
		{name: "javascript seccomp filter", job: Job{Language: "javascript", Code: "import fs from 'node:fs';\nconsole.log(fs.readFileSync('/proc/self/status', 'utf8').match(/^(NoNewPrivs|Seccomp):.*$/gm).join(' ').replace(/\\s+/g, ''))"}, wantOut: "NoNewPrivs:1Seccomp:2\n"},
		// node starts from the image's start-up snapshot (boot.py, the image's Dockerfile),
		// whose main runs the program as node FILE would: the main module is the program,
		// and a child node (fork) inherits the flag and runs its own file.
		{name: "javascript start-up snapshot", job: Job{Language: "javascript", Code: "console.log(process.execArgv.includes('--snapshot-blob'), require.main === module, process.argv[1].startsWith('/dev/fd/'))"}, wantOut: "true true true\n"},
		{name: "javascript fork", job: Job{Language: "javascript", Code: "import { fork } from 'node:child_process';\nimport fs from 'node:fs';\nfs.writeFileSync('/tmp/c.js', 'process.send(process.argv[1])');\nconst c = fork('/tmp/c.js');\nc.on('message', m => { console.log(m); c.disconnect() })"}, wantOut: "/tmp/c.js\n"},
		{name: "javascript no capabilities", job: Job{Language: "javascript", Code: "import fs from 'node:fs';\nconsole.log(fs.readFileSync('/proc/self/status', 'utf8').match(/^CapEff:\\s*(\\S+)/m)[1])"}, wantOut: "0000000000000000\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := l.Run(t.Context(), tt.job)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tt.wantExit {
				t.Errorf("exit code: got %d, want %d (stderr %q)", res.ExitCode, tt.wantExit, res.Stderr)
			}
			if !tt.wantTrunc && tt.wantFile == "" && res.Stdout != tt.wantOut {
				t.Errorf("stdout: got %q, want %q (stderr %q)", res.Stdout, tt.wantOut, res.Stderr)
			}
			if !strings.Contains(res.Stderr, tt.wantErr) {
				t.Errorf("stderr: got %q, want it to contain %q", res.Stderr, tt.wantErr)
			}
			if res.Truncated != tt.wantTrunc {
				t.Errorf("truncated: got %v, want %v", res.Truncated, tt.wantTrunc)
			}
			if tt.wantTrunc && len(res.Stdout)+len(res.Stderr) > 64<<10 {
				t.Errorf("output: got %d bytes, want at most %d", len(res.Stdout)+len(res.Stderr), 64<<10)
			}
			if tt.wantFile != "" {
				name, want, _ := strings.Cut(tt.wantFile, "=")
				got := "(not returned)"
				for _, f := range res.Files {
					if f.Name == name {
						got = string(f.Data)
					}
				}
				if got != want {
					t.Errorf("file %s: got %q, want %q (files %v, stderr %q)", name, got, want, names(res.Files), res.Stderr)
				}
			}
			if res.TimedOut || res.OOMKilled {
				t.Errorf("timed out %v, oom killed %v: want neither", res.TimedOut, res.OOMKilled)
			}
		})
	}
}

// TestLanguageTimeoutKillsTree: the timeout ends a bash or node program and what it
// started, as it does Python's (TestTimeoutKillsProcessTree). 4 s: node's start alone
// took over 2 s on a loaded 2-core host under -race.
func TestLanguageTimeoutKillsTree(t *testing.T) { bothWays(t, Options{}, languageTimeoutKillsTree) }

func languageTimeoutKillsTree(t *testing.T, l *Launcher) {
	for lang, code := range map[string]string{
		"bash":       "trap '' TERM\nsleep 100 &\nsetsid sleep 100 &\necho spawned\nwhile :; do sleep 1; done",
		"javascript": "import { spawn } from 'node:child_process';\nspawn('sleep', ['100'], { detached: true, stdio: 'ignore' }).unref();\nprocess.on('SIGTERM', () => {});\nconsole.log('spawned');\nsetInterval(() => {}, 1000);",
		"typescript": "import { spawn, type ChildProcess } from 'node:child_process';\nconst c: ChildProcess = spawn('sleep', ['100'], { detached: true, stdio: 'ignore' });\nc.unref();\nprocess.on('SIGTERM', (): void => {});\nconsole.log('spawned');\nsetInterval(() => {}, 1000);",
	} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			res, err := l.Run(t.Context(), Job{Language: lang, Code: code, Timeout: 4 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut || res.ExitCode != 137 || res.Stdout != "spawned\n" {
				t.Errorf("got timed out %v, exit %d, stdout %q; want true, 137, %q (stderr %q)", res.TimedOut, res.ExitCode, res.Stdout, "spawned\n", res.Stderr)
			}
			if res.Duration < 4*time.Second || time.Since(start) > 20*time.Second {
				t.Errorf("duration: got %v (wall %v), want about 4s", res.Duration, time.Since(start))
			}
			// Every process of the program is gone with its sandbox: the launcher's
			// cleanup asserts that no container of this instance is left.
		})
	}
}

// TestLanguageMemoryLimit: a bash or node program that touches more than the memory
// limit is stopped short; in a container it is killed for it, and the result says so.
func TestLanguageMemoryLimit(t *testing.T) {
	bothWays(t, Options{Memory: 128 << 20}, languageMemoryLimit)
}

func languageMemoryLimit(t *testing.T, l *Launcher) {
	for lang, code := range map[string]string{
		"bash":       "x=$(head -c 300M /dev/zero | tr '\\0' x)\necho survived",
		"javascript": "const a = [];\nfor (let i = 0; i < 40; i++) a.push(Buffer.alloc(10 << 20, 1));\nconsole.log('survived')",
	} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			res, err := l.Run(t.Context(), Job{Language: lang, Code: code})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode == 0 || strings.Contains(res.Stdout, "survived") {
				t.Errorf("got exit %d, stdout %q; want the program stopped short (stderr %q)", res.ExitCode, res.Stdout, res.Stderr)
			}
			// The process backend's limit is RLIMIT_DATA: the allocation fails (bash's
			// xrealloc, node's RangeError) before the container's cgroup would kill.
			if process := os.Getenv("MCP_EXEC_TEST_BACKEND") == "process"; res.OOMKilled == process {
				t.Errorf("oom killed: got %v on the %s backend (stderr %q)", res.OOMKilled, map[bool]string{true: "process", false: "container"}[process], res.Stderr)
			}
		})
	}
}

// TestBootInterpreterPath: boot.py finds the interpreter on PATH itself (os.execvpe
// would import warnings for it, on every call) and keeps execvpe's rules: a directory
// without it or a file that cannot run is passed over, and when none runs the error is
// the first that is not "no such file". Local: boot.py with this machine's python3 and
// bash.
func TestBootInterpreterPath(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3 and bash")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	// The interpreter itself, not a wrapper that may look for bash on PATH (pyenv's).
	real, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skip("no python3 on this machine")
	}
	noExec := t.TempDir()
	if err := os.WriteFile(filepath.Join(noExec, "bash"), []byte("#!/bin/sh\necho wrong\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path, wantOut, wantErr string
	}{
		{path: "/nonexistent:" + noExec + ":" + filepath.Dir(bash), wantOut: "ran\n"},
		{path: "/nonexistent:" + t.TempDir(), wantErr: "mcp-exec: cannot start bash: No such file or directory"},
		{path: "/nonexistent:" + noExec + ":/nonexistent2", wantErr: "mcp-exec: cannot start bash: Permission denied"},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd, in, d, _, diag := frameBootstrapCommand(ctx, t, Options{}, "echo ran")
		cmd.Path = strings.TrimSpace(string(real))
		cmd.Env = append(os.Environ(), "PATH="+tt.path)
		cmd.Stdin = strings.NewReader(strings.Replace(in, " 0\n", " 0 bash\n", 1))
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("running boot.py: %v (stderr %q)", err, diag.String())
			}
		}
		cancel()
		s := frameSnapshot(d)
		if s.Exit == nil || s.RawOut != tt.wantOut || !strings.Contains(s.RawErr, tt.wantErr) || (tt.wantErr != "") != (s.Exit.Exit != 0) {
			t.Errorf("PATH %s: got exit %+v, stdout %q, stderr %q (fatal %q); want stdout %q, stderr with %q (boot.py: %q)",
				tt.path, s.Exit, s.RawOut, s.RawErr, s.Fatal, tt.wantOut, tt.wantErr, diag.String())
		}
	}
}

// TestLanguageRefused: tools for bash (code mode is Python's and JavaScript's, in a
// session too) and unknown languages are refused with ErrLanguage before any sandbox is
// used.
func TestLanguageRefused(t *testing.T) {
	for _, job := range []Job{
		{Language: "ruby", Code: "puts 1"},
		{Language: "bash", Code: "echo", Tools: &Tools{}},
	} {
		if err := job.checkLanguage(); !errors.Is(err, ErrLanguage) {
			t.Errorf("%s with tools %v: got %v, want ErrLanguage", job.Language, job.Tools != nil, err)
		}
	}
	for _, job := range []Job{{Language: "bash", Code: "1", Tools: &Tools{}}, {Language: "ruby", Code: "1"}} {
		if err := sessionJob(job); !errors.Is(err, ErrLanguage) {
			t.Errorf("session job in %s with tools %v: got %v, want ErrLanguage", job.Language, job.Tools != nil, err)
		}
	}
	for _, job := range []Job{{Language: "bash", Code: "1"}, {Language: "javascript", Code: "1"}, {Language: "javascript", Code: "1", Tools: &Tools{}},
		{Language: "typescript", Code: "1"}, {Language: "typescript", Code: "1", Tools: &Tools{}}} {
		if err := sessionJob(job); err != nil {
			t.Errorf("session job in %s with tools %v: got %v, want nil", job.Language, job.Tools != nil, err)
		}
	}
	for _, lang := range []string{"", LanguagePython, "bash", "javascript"} {
		if err := (Job{Language: lang}).checkLanguage(); err != nil {
			t.Errorf("%q: got %v, want nil", lang, err)
		}
	}
	for _, lang := range []string{"javascript", "typescript"} {
		if err := (Job{Language: lang, Tools: &Tools{}}).checkLanguage(); err != nil {
			t.Errorf("%s with tools: got %v, want nil", lang, err)
		}
	}
}

// TestCheckLanguages: the start-up check runs a program in each language and returns
// the interpreters' versions; a check that fails (here: a tool the image lacks) is
// ErrLanguageMissing, naming the language and what the program said.
func TestCheckLanguages(t *testing.T) {
	l := testLauncher(t, Options{MaxQueue: 4}) // three checks at once, two slots: as the server's queue
	v, err := l.CheckLanguages(t.Context(), []string{"python", "bash", "javascript", "typescript"})
	if err != nil || !strings.HasPrefix(v["bash"], "5.") || v["javascript"] == "" || !strings.Contains(v["typescript"], ", esbuild 0.") {
		t.Fatalf("got %v, %v; want bash 5.x, a node version, and node's and esbuild's", v, err)
	}
	saved := languageChecks["bash"]
	t.Cleanup(func() { languageChecks["bash"] = saved })
	languageChecks["bash"] = `command -v nosuchtool >/dev/null || { echo "missing: nosuchtool"; exit 1; }; echo ok`
	if _, err := l.CheckLanguages(t.Context(), []string{"python", "bash"}); !errors.Is(err, ErrLanguageMissing) || !strings.Contains(err.Error(), "missing: nosuchtool") {
		t.Errorf("a missing tool: got %v, want ErrLanguageMissing naming it", err)
	}
	if _, err := l.CheckLanguages(t.Context(), []string{"ruby"}); !errors.Is(err, ErrLanguage) {
		t.Errorf("an unknown language: got %v, want ErrLanguage", err)
	}
}

// bothWays runs a language test in cold sandboxes and again in warm-pool ones with
// bash and node started ahead (Options.Prestart): the program must not tell them apart.
func bothWays(t *testing.T, o Options, test func(*testing.T, *Launcher)) {
	t.Run("cold", func(t *testing.T) { test(t, testLauncher(t, o)) })
	t.Run("prestart", func(t *testing.T) {
		o := o
		o.PoolSize, o.Prestart = 2, []string{"bash", "javascript"}
		test(t, testLauncher(t, o))
	})
}

// TestPoolPrestart: with Options.Prestart a warm-pool sandbox's bash was started ahead
// and takes the program from the Python child (its parent, not PID 1); a bash program
// that exits before the end of its file ends as it says; and a Python call in such a
// sandbox runs with no idle bash left beside it.
func TestPoolPrestart(t *testing.T) {
	l := testLauncher(t, Options{PoolSize: 1, Prestart: []string{"bash"}})
	tail := strings.Repeat("# padding\n", 30000) // past the pipe's 64 KiB
	for _, tc := range []struct {
		name string
		job  Job
		exit int
		out  string
	}{
		{"started ahead", Job{Language: "bash", Code: `test "$PPID" != 1 && echo ahead`}, 0, "ahead\n"},
		{"killed", Job{Language: "bash", Code: "echo x; kill -9 $$"}, 137, "x\n"},
		{"early exit", Job{Language: "bash", Code: "echo early; exit 3\n" + tail + "echo not reached"}, 3, "early\n"},
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
}
