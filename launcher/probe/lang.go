package probe

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// The probes of the languages besides Python: the interpreter the bootstrap execs
// (boot.py) keeps the sandbox Python's programs see, checked from inside by a program
// in that language, one per group of promises (sh/*.sh for bash, js/*.mjs for
// JavaScript; the same verdict lines as the Python set). They ask what the Python
// set asks, in fewer programs: the bootstrap and the sandbox are the same, what a
// language can change is what its interpreter inherits and may do. TypeScript's
// program is node, as JavaScript's: what it adds is esbuild, a process of its own, so
// its one group is the tree (ts/tree_start.ts, JavaScript's files for the rest).
//
//go:embed sh/*.sh js/*.mjs ts/*.ts
var langFiles embed.FS

// langProgram is one language's way of writing a program: its files, their
// extension, and its header of the configured values.
type langProgram struct {
	dir, ext string
	header   func(name string, v any) string
	// allocFailed is the interpreter's complaint (stderr) of an allocation that
	// RLIMIT_DATA refused (the process backend).
	allocFailed *regexp.Regexp
	// treeOnly: the language has the tree group alone, and reads the files it has
	// none of from JavaScript's (a JavaScript program is TypeScript).
	treeOnly bool
}

var langPrograms = map[string]langProgram{
	"bash": {dir: "sh", ext: ".sh",
		header:      func(name string, v any) string { return fmt.Sprintf("%s=%s\n", name, shellValue(v)) },
		allocFailed: regexp.MustCompile(`cannot allocate`)},
	"javascript": {dir: "js", ext: ".mjs",
		header:      func(name string, v any) string { return fmt.Sprintf("const %s = %s;\n", name, jsValue(v)) },
		allocFailed: regexp.MustCompile(`RangeError|allocation failed|out of memory`)},
	"typescript": {dir: "ts", ext: ".ts", treeOnly: true,
		header: func(name string, v any) string { return fmt.Sprintf("const %s = %s;\n", name, jsValue(v)) }},
}

// Languages returns the probes of each named language besides Python (an unknown one
// has none), asserting against the limits in o, named "<language>_<group>".
func Languages(o Params, langs ...string) []Probe {
	o = withToken(o)
	var out []Probe
	for _, lang := range langs {
		lp, ok := langPrograms[lang]
		if !ok {
			continue
		}
		hdr := lp.header("MEMORY", o.Memory) + lp.header("PIDS", o.Pids) + lp.header("TMPFS_SIZE", o.TmpfsSize) +
			lp.header("SANDBOX_UID", SandboxUID) + lp.header("TOKEN", o.Token) + lp.header("GVISOR", o.GVisor) +
			lp.header("PROCESS", o.Process)
		mk := func(group, claim string, timeout time.Duration, check func(launcher.Result) error, files ...string) Probe {
			code := hdr + lp.read("prelude")
			for _, f := range files {
				code += lp.read(f)
			}
			if check == nil {
				check = Passed
			}
			return Probe{Name: lang + "_" + group, Claim: lang + ": " + claim, Check: check,
				Job: launcher.Job{Language: lang, Code: code, Timeout: timeout}}
		}
		memory := memoryKilled
		if o.Process {
			memory = killedOrRefused(lp.allocFailed)
		}
		tree := mk("timeout_kills_tree",
			"at the timeout every process of the program is killed, a background child and one in a session of its own included, before the next run",
			treeTimeout, treeTimedOut, "tree_start")
		next := mk("timeout_kills_tree", tree.Claim, probeTimeout, nil, "tree_check")
		tree.Next, tree.AwaitRemoval = &next, true
		// The tree probe first: it waits out its timeout, which the others then share.
		out = append(out, tree)
		if lp.treeOnly {
			continue
		}
		out = append(out,
			mk("network", "the only interface is lo with no route off it; TCP and UDP to outside addresses find no route (ENETUNREACH); names do not resolve",
				probeTimeout, nil, "network"),
			mk("privileges", "the program and the bootstrap run as uid/gid 65532 with every capability set empty, no_new_privs and a seccomp filter (mode 2)",
				probeTimeout, nil, "privileges"),
			mk("filesystem", "the root filesystem is read-only; /tmp is writable and capped at TmpfsSize (ENOSPC beyond); /proc/sys and /sys cannot be written",
				probeTimeout, nil, "filesystem"),
			mk("pids_limit", "processes stop below Pids and the program survives to go on",
				probeTimeout, nil, "pids"),
			mk("memory_limit", "a program touching twice Memory is stopped: OOM-killed and said so (the process backend: that, or its allocation fails)",
				probeTimeout, memory, "memory"))
	}
	return out
}

// treeTimeout is the tree probe's timeout: room for node's start on a loaded host
// (over 2 s seen under -race, TestLanguageTimeoutKillsTree) and its two children.
const treeTimeout = 6 * time.Second

func (lp langProgram) read(name string) string {
	data, err := langFiles.ReadFile(lp.dir + "/" + name + lp.ext)
	if err != nil && lp.treeOnly {
		data, err = langFiles.ReadFile("js/" + name + ".mjs")
	}
	if err != nil {
		panic(err) // a name in this file that has no file: caught by every test
	}
	return string(data)
}

// treeTimedOut: the program started its children, named its sandbox and was killed at
// its timeout, having failed nothing.
func treeTimedOut(r launcher.Result) error {
	var errs []error
	for _, l := range strings.Split(r.Stdout, "\n") {
		if reason, ok := strings.CutPrefix(l, failPrefix); ok {
			errs = append(errs, fmt.Errorf("%s", strings.TrimSpace(strings.TrimPrefix(reason, ":"))))
		}
	}
	if !strings.Contains(r.Stdout, "\nSPAWNED 2\n") {
		errs = append(errs, fmt.Errorf("the program did not report its two children up (stdout %q)", r.Stdout))
	}
	if SandboxID(r.Stdout) == "" {
		errs = append(errs, errors.New("the program printed no SANDBOX-ID line: cannot confirm its container is removed"))
	}
	if !r.TimedOut || r.ExitCode != 137 {
		errs = append(errs, fmt.Errorf("timed out %v, exit code %d; want the timeout's kill (137)", r.TimedOut, r.ExitCode))
	}
	return errors.Join(errs...)
}

// killedOrRefused is the memory probe's Check on the process backend, whose limits are
// RLIMIT_DATA per run and the cgroup of the container that the server and its runs
// share: whichever a program reaches first stops it. Either it is OOM-killed, as in a
// container of its own (memoryKilled), or its allocation fails and ends it, with the
// interpreter's complaint matching want on stderr (node's RangeError came first,
// bash's xrealloc did not, under the standalone test's 256 MiB for both).
func killedOrRefused(want *regexp.Regexp) func(launcher.Result) error {
	return func(r launcher.Result) error {
		killed := memoryKilled(r)
		if killed == nil {
			return nil
		}
		if !r.OOMKilled {
			return allocationRefused(r, want)
		}
		return killed
	}
}

// allocationRefused: the program's allocation failed and ended it, no OOM kill.
func allocationRefused(r launcher.Result, want *regexp.Regexp) error {
	if err := Verdict(r.Stdout); err != nil && !strings.HasPrefix(err.Error(), "no verdict") {
		return err // the program failed an assertion of its own
	}
	var errs []error
	if !strings.HasPrefix(r.Stdout, "ALLOCATING\n") {
		errs = append(errs, errors.New("the program never reached its allocation (no ALLOCATING line)"))
	}
	if r.ExitCode == 0 || r.TimedOut || strings.Contains(r.Stdout, okLine) {
		errs = append(errs, fmt.Errorf("exit code %d, timed out %v; want the allocation to fail and end the program", r.ExitCode, r.TimedOut))
	}
	if !want.MatchString(r.Stderr) {
		errs = append(errs, fmt.Errorf("stderr %q does not say the allocation failed", lastLine(r.Stderr)))
	}
	return errors.Join(errs...)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// shellValue writes v as a bash word: numbers as they are, booleans 1 or 0, strings
// single-quoted.
func shellValue(v any) string {
	switch v := v.(type) {
	case bool:
		return map[bool]string{true: "1", false: "0"}[v]
	case string:
		return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
	default:
		return fmt.Sprint(v)
	}
}

// jsValue writes v as a JavaScript literal: JSON is one.
func jsValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
