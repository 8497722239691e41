package process

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

func TestParseUIDTasks(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want uidTasks
		bad  bool
	}{
		{out: "here_before 3\nhost 25\nhere_after 4\n", want: uidTasks{Host: 25, Here: 4}},
		{out: "here_before 5\nhost 5\nhere_after 4\n", want: uidTasks{Host: 5, Here: 5}},
		{out: "here_before 3\nhost_at_least 50\nhere_after 3\n", want: uidTasks{Host: 50, Here: 3, AtLeast: true}},
		{out: "here_before 200\nunenforced 1\nhere_after 200\n", want: uidTasks{Here: 200, Unenforced: true}},
		{out: "here_before 3\nhere_after 3\n", bad: true},
		{out: "here_before 3\nhost 4\n", bad: true},
		{out: "here_before 3\nhost x\nhere_after 3\n", bad: true},
		{out: "here_before 3\nhost -1\nhere_after 3\n", bad: true},
		{out: "here_before 3\nhost 4\nhere_after 3\nextra 1\n", bad: true},
		{out: "", bad: true},
	} {
		got, err := parseUIDTasks(tc.out)
		switch {
		case tc.bad && err == nil:
			t.Errorf("parseUIDTasks(%q) = %+v, nil; want an error", tc.out, got)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("parseUIDTasks(%q) = %+v, %v; want %+v", tc.out, got, err, tc.want)
		}
	}
}

// TestNprocNote: the start-up log warns exactly when tasks of the uid run outside the
// container, with the numbers, what they leave a run and the fix; and says so when
// nothing could be measured.
func TestNprocNote(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tasks uidTasks
		procs int64
		want  []string // substrings; nil: no note
	}{
		{"alone", uidTasks{Host: 4, Here: 4}, 96, nil},
		{"alone, a thread more here", uidTasks{Host: 4, Here: 5}, 96, nil},
		{"a neighbour", uidTasks{Host: 64, Here: 4}, 96,
			[]string{"uid 65532 already has 60 tasks on this host outside", "kernel counts 64", "/proc shows 4", "with the server's 3 they leave a run 33 of its 96 tasks", "a uid of its own", "user namespace"}},
		{"a neighbour at the limit", uidTasks{Host: 97, Here: 4}, 96,
			[]string{"93 tasks", "every run's first fork fails with EAGAIN", "a uid of its own"}},
		{"the hard limit reached", uidTasks{Host: 50, Here: 4, AtLeast: true}, 96,
			[]string{"46 tasks or more", "kernel counts 50 or more", "leave a run"}},
		{"no RLIMIT_NPROC for runs", uidTasks{Host: 30, Here: 4}, 0,
			[]string{"26 tasks", "runs get no RLIMIT_NPROC here", "a uid of its own"}},
		{"not measurable", uidTasks{Here: 4, Unenforced: true}, 96,
			[]string{"not measured", "CAP_SYS_RESOURCE"}},
	} {
		got := nprocNote(65532, tc.tasks, tc.procs)
		if tc.want == nil {
			if got != "" {
				t.Errorf("%s: got note %q, want none", tc.name, got)
			}
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: got note %q, want it to say %q", tc.name, got, w)
			}
		}
	}
}

// TestCountUIDTasksAcrossPIDNamespaces: the count child, in a container of its own,
// sees the tasks of its uid in another container, which its /proc does not show:
// the kernel's count is what a run's fork meets. A uid of its own (random) keeps the
// other tests' sandboxes out of the count.
func TestCountUIDTasksAcrossPIDNamespaces(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker not found (CI runs the tests on the engine's host)")
		}
		t.Skip("docker not found")
	}
	const image = "mcp-exec/python-sandbox:v1"
	uid := 60000 + rand.IntN(5000)
	user := fmt.Sprintf("%d:%d", uid, uid)
	count := func() uidTasks {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), docker, "run", "--rm", "--user", user, "--network", "none", "--cap-drop", "ALL",
			"--security-opt", "no-new-privileges", image, "python3", "-I", "-S", "-c", nprocPy).CombinedOutput()
		if err != nil {
			t.Fatalf("docker run (the count child): %v: %s", err, out)
		}
		got, err := parseUIDTasks(string(out))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := count(); got != (uidTasks{Host: 1, Here: 1}) {
		t.Fatalf("alone: got %+v, want Host 1, Here 1 (the count child itself)", got)
	}
	if note := nprocNote(uid, uidTasks{Host: 1, Here: 1}, 96); note != "" {
		t.Fatalf("alone: got note %q, want none", note)
	}

	const held = 20
	launchertest.Neighbour(t, docker, user, held)
	got := count()
	if want := (uidTasks{Host: held + 1, Here: 1}); got != want {
		t.Fatalf("beside a container of the same uid with %d tasks: got %+v, want %+v", held, got, want)
	}
	note := nprocNote(uid, got, 96)
	for _, w := range []string{fmt.Sprintf("uid %d already has %d tasks on this host outside this container", uid, held), "a uid of its own"} {
		if !strings.Contains(note, w) {
			t.Errorf("note %q: want it to say %q", note, w)
		}
	}
}

// TestCountUIDTasksHere: run by this test's user, the child counts (as root: says the
// limit does not apply, rather than a count); in one PID namespace the kernel's count
// includes at least what /proc shows.
func TestCountUIDTasksHere(t *testing.T) {
	if python() == "" {
		t.Fatal("python3 not found")
	}
	got, err := countUIDTasks(t.Context(), python())
	if err != nil {
		t.Fatal(err)
	}
	switch root := os.Geteuid() == 0; {
	case root && !got.Unenforced:
		t.Errorf("as root: got %+v, want Unenforced", got)
	case !root && (got.Unenforced || got.Here < 1 || got.Host < got.Here):
		t.Errorf("as uid %d: got %+v, want Host >= Here >= 1", os.Geteuid(), got)
	}
}
