package launcher_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/probe"
)

// sessionRunner runs each job as the first call of a new session, closed after it:
// the probes then look at a session's sandbox.
type sessionRunner struct{ l *launcher.Launcher }

func (r sessionRunner) Run(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	s, err := r.l.OpenSession(ctx, launcher.SessionOptions{Expires: time.Now().Add(time.Hour)})
	if err != nil {
		return launcher.Result{}, err
	}
	defer s.Close()
	return s.Exec(ctx, job)
}

// sessionDifferences are the probes that see a session's own holder process (the
// interpreter the call was forked from: the same caller's, docs/sessions.md): the
// verdict each gives, which must be this one exactly, failing nothing else.
var sessionDifferences = map[string]*regexp.Regexp{
	// the holder, and no other process
	"daemon_not_persisted": regexp.MustCompile(`^processes other than the bootstrap and the program: \[\d+\]$`),
	// the holder's cell and event pipes (7 and 10, under runc and runsc alike), and no
	// other descriptor
	"fds_only_std": regexp.MustCompile(`^open file descriptors beyond 0-2: \['7->pipe:\[\d+\]', '10->pipe:\[\d+\]'\]$`),
	// the holder is the parent, not PID 1; every access to PID 1 refused
	"bootstrap_unreachable": regexp.MustCompile(`^parent is \d+, want 1$`),
}

// sessionDifference checks a documented difference: the probe ran to its verdict
// (exit 1, no signal, timeout or cut) and the verdict is want's and nothing more.
func sessionDifference(res launcher.Result, err error, want *regexp.Regexp) error {
	if err == nil {
		return errors.New("passed, want the documented difference")
	}
	if res.ExitCode != 1 || res.Signal != 0 || res.TimedOut || res.Truncated || res.OOMKilled {
		return fmt.Errorf("%v (result %+v), want the probe's verdict alone", err, res)
	}
	if v := probe.Verdict(res.Stdout); v == nil || !want.MatchString(v.Error()) {
		return fmt.Errorf("got verdict %v, want exactly %s", v, want)
	}
	return nil
}

// pid1Refusals checks that bootstrap_unreachable tried PID 1's descriptors and was
// refused. Under Linux the listing of /proc/1/fd is itself refused (EACCES or EPERM).
// Under gVisor (gvisor: the runtime's name says runsc, and the probe checks that the
// kernel is gVisor's), which lists the numbers, each listed descriptor's open and
// readlink must be refused with EACCES or EPERM, or with ENOENT, gVisor's answer for a
// descriptor PID 1 closed after the listing: it looks the number up before it checks
// access, and a session's PID 1 opens and closes /proc/<holder>/stat on each turn of
// its loop (pid1.py). At least one refusal must be for access.
func pid1Refusals(stdout string, gvisor bool) error {
	if !gvisor {
		if !regexp.MustCompile(`(?m)^list /proc/1/fd: denied \((EACCES|EPERM)\)$`).MatchString(stdout) {
			return errors.New("no line says the listing of /proc/1/fd was denied with EACCES or EPERM")
		}
		return nil
	}
	m := regexp.MustCompile(`(?m)^note: gVisor: /proc/1/fd lists \[([^]]*)\] to the program`).FindStringSubmatch(stdout)
	if m == nil {
		return errors.New("no line says what /proc/1/fd listed")
	}
	var errs []error
	byAccess := 0
	for _, q := range strings.Split(m[1], ", ") {
		fd := strings.Trim(q, "'")
		for _, op := range []string{"open", "readlink"} {
			r := regexp.MustCompile(`(?m)^` + op + ` /proc/1/fd/` + regexp.QuoteMeta(fd) + `: denied \((EACCES|EPERM|ENOENT)\)$`).FindStringSubmatch(stdout)
			switch {
			case r == nil:
				errs = append(errs, fmt.Errorf("%s of listed descriptor %s: no refusal (EACCES, EPERM or ENOENT) reported", op, fd))
			case r[1] != "ENOENT":
				byAccess++
			}
		}
	}
	if byAccess == 0 {
		errs = append(errs, errors.New("no listed descriptor was refused for access (EACCES/EPERM)"))
	}
	return errors.Join(errs...)
}

// TestSessionInvariants runs every probe of the sandbox contract in a session's
// sandbox, as TestInvariants does in one-shot sandboxes; three see the session's
// holder (sessionDifferences), the rest must pass.
func TestSessionInvariants(t *testing.T) {
	l, _ := invariantsLauncher(t, invariantOptions)
	p := probe.ParamsOf(l.Options())
	p.CanaryName, p.CanaryValue = "MCP_EXEC_PROBE_CANARY_"+strings.ToUpper(randHex(t, 4)), randHex(t, 16)
	if err := os.Setenv(p.CanaryName, p.CanaryValue); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv(p.CanaryName) })
	p.HostAddrs = hostAddrs(t)
	p.Token = randHex(t, 6)
	for _, pr := range probe.All(p) {
		t.Run(pr.Name, func(t *testing.T) {
			if !pr.Exclusive { // an Exclusive probe runs here, before the parallel ones start
				t.Parallel()
			}
			res, evidence, err := probe.Run(t.Context(), sessionRunner{l}, l, pr)
			if errors.Is(err, probe.ErrNoHostView) {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s: %v (CI runs the tests on the engine's host)", pr.Name, err)
				}
				t.Skipf("%s not checked: %v", pr.Name, err)
			}
			if want, ok := sessionDifferences[pr.Name]; ok {
				if derr := sessionDifference(res, err, want); derr != nil {
					t.Fatalf("%s: %v\n  stdout:\n%s", pr.Name, derr, indent(res.Stdout))
				}
				if pr.Name == "bootstrap_unreachable" {
					if perr := pid1Refusals(res.Stdout, p.GVisor); perr != nil {
						t.Fatalf("%s: %v\n  stdout:\n%s", pr.Name, perr, indent(res.Stdout))
					}
				}
				t.Logf("%s: documented difference in a session: %v\n  notes:\n%s", pr.Name, err, indent(notes(res.Stdout)))
				return
			}
			if err != nil {
				t.Fatalf("%s does not hold in a session: %s\n  result: exit %d, signal %d, oom %v, timed out %v, state %q\n  outside:\n%s\n  stdout:\n%s\n  stderr:\n%s",
					pr.Name, err, res.ExitCode, res.Signal, res.OOMKilled, res.TimedOut, res.SessionState,
					indent(evidence), indent(res.Stdout), indent(res.Stderr))
			}
		})
	}
}

// notes are the probe's "note:" lines, which say where the kernel differs.
func notes(stdout string) string {
	var out []string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "note: ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSessionDifferenceIsExact: the checks above fail when the probe reached PID 1 or
// skipped a descriptor, not only when the difference is missing.
func TestSessionDifferenceIsExact(t *testing.T) {
	want := sessionDifferences["bootstrap_unreachable"]
	fail := func(verdict string) launcher.Result {
		return launcher.Result{ExitCode: 1, Stdout: "x\nPROBE FAIL: " + verdict + "\n"}
	}
	for _, tc := range []struct {
		name string
		res  launcher.Result
		ok   bool
	}{
		{"the difference alone", fail("parent is 6, want 1"), true},
		{"PID 1 reached too", fail("parent is 6, want 1; open /proc/1/fd/3: succeeded (<_io.BufferedReader>), want EACCES/EPERM"), false},
		{"an unexpected errno too", fail("open /proc/1/fd/4: failed with ENOENT (x), want EACCES/EPERM; parent is 6, want 1"), false},
		{"killed", launcher.Result{ExitCode: 137, Signal: 9, Stdout: "PROBE FAIL: parent is 6, want 1\n"}, false},
	} {
		err := sessionDifference(tc.res, errors.New("failed"), want)
		if (err == nil) != tc.ok {
			t.Errorf("%s: sessionDifference: got %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if err := sessionDifference(launcher.Result{Stdout: "PROBE OK\n"}, nil, want); err == nil {
		t.Error("a probe that passed: sessionDifference got nil, want an error")
	}

	const listed = "note: gVisor: /proc/1/fd lists ['0', '1', '4'] to the program (numbers only)\n"
	all := func(e4 string) string {
		s := listed
		for _, fd := range []string{"0", "1", "4"} {
			e := "EACCES"
			if fd == "4" {
				e = e4
			}
			s += "open /proc/1/fd/" + fd + ": denied (" + e + ")\nreadlink /proc/1/fd/" + fd + ": denied (" + e + ")\n"
		}
		return s
	}
	for _, tc := range []struct {
		name, stdout string
		gvisor, ok   bool
	}{
		{"runc: listing refused", "list /proc/1/fd: denied (EACCES)\n", false, true},
		{"runc: no listing line", "readlink /proc/1/exe: denied (EACCES)\n", false, false},
		{"runc: listing refused with ENOENT", "list /proc/1/fd: denied (ENOENT)\n", false, false},
		{"gVisor: every fd refused", all("EACCES"), true, true},
		{"gVisor: a closed fd answers ENOENT", all("ENOENT"), true, true},
		{"gVisor: a listed fd not tried", strings.ReplaceAll(all("EACCES"), "open /proc/1/fd/4: denied (EACCES)\n", ""), true, false},
		{"gVisor: another errno", all("EIO"), true, false},
		{"gVisor: only ENOENT", listed + "open /proc/1/fd/0: denied (ENOENT)\nreadlink /proc/1/fd/0: denied (ENOENT)\n" +
			"open /proc/1/fd/1: denied (ENOENT)\nreadlink /proc/1/fd/1: denied (ENOENT)\n" +
			"open /proc/1/fd/4: denied (ENOENT)\nreadlink /proc/1/fd/4: denied (ENOENT)\n", true, false},
		{"gVisor: no listing note", "open /proc/1/fd/0: denied (EACCES)\n", true, false},
	} {
		if err := pid1Refusals(tc.stdout, tc.gvisor); (err == nil) != tc.ok {
			t.Errorf("%s: pid1Refusals: got %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
