package process

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// The kernel counts RLIMIT_NPROC per uid across the whole host (without a user
// namespace of the container's own): every task of the sandbox uid in any container
// counts against each run's limit here. This file measures that at start-up and says
// so in the log; it never refuses to start (see nprocNote).

//go:embed nproc.py
var nprocPy string

// uidTasks is what the count child saw (nproc.py).
type uidTasks struct {
	// Host is the uid's tasks as the kernel counts them for RLIMIT_NPROC (the child
	// included); Here is those this container's /proc shows (the larger of two scans,
	// before and after the kernel's count).
	Host, Here int64
	// AtLeast: Host is a lower bound, the container's hard RLIMIT_NPROC; a fork failed
	// even under it.
	AtLeast bool
	// Unenforced: a fork under RLIMIT_NPROC 1 succeeded, so the limit does not apply
	// to this uid (root, CAP_SYS_RESOURCE, CAP_SYS_ADMIN) and nothing was measured.
	Unenforced bool
}

// countUIDTasks runs nproc.py with python (a path) and parses what it prints.
func countUIDTasks(ctx context.Context, python string) (uidTasks, error) {
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", nprocPy)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return uidTasks{}, fmt.Errorf("running the task count child: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	return parseUIDTasks(string(out))
}

func parseUIDTasks(out string) (uidTasks, error) {
	var t uidTasks
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 0 {
			return uidTasks{}, fmt.Errorf("task count child: unexpected line %q", line)
		}
		seen[k] = true
		switch k {
		case "here_before", "here_after":
			t.Here = max(t.Here, n)
		case "host":
			t.Host = n
		case "host_at_least":
			t.Host, t.AtLeast = n, true
		case "unenforced":
			t.Unenforced = true
		default:
			return uidTasks{}, fmt.Errorf("task count child: unexpected line %q", line)
		}
	}
	if !seen["here_before"] || !seen["here_after"] || !(seen["host"] || seen["host_at_least"] || seen["unenforced"]) {
		return uidTasks{}, fmt.Errorf("task count child: incomplete output %q", out)
	}
	return t, nil
}

// nprocNote decides what the start-up log says of t for runs whose RLIMIT_NPROC is
// procs (runProcs; 0: none set): "" when no task of the uid runs outside this
// container, else a warning with the numbers and the fix.
//
// A warning, never a refusal: what it predicts is safe (a run's fork fails with
// EAGAIN, which the run reports; no run ever shares another's processes), the count
// is a moment's (a neighbour's tasks come and go, and a neighbour started later is not
// seen at all), so refusing would stop a server that works a minute later and still
// not guard one that starts alone.
func nprocNote(uid int, t uidTasks, procs int64) string {
	if t.Unenforced {
		return fmt.Sprintf("RLIMIT_NPROC: not measured, a fork under RLIMIT_NPROC 1 succeeded (uid %d is root or holds CAP_SYS_RESOURCE or CAP_SYS_ADMIN)", uid)
	}
	outside := t.Host - t.Here
	if outside <= 0 {
		return ""
	}
	fix := "give each standalone container a uid of its own on its host (docker run --user 64000:64000; Kubernetes: runAsUser) or a user namespace (dockerd's userns-remap; Kubernetes: hostUsers: false)"
	more := ""
	if t.AtLeast {
		more = " or more"
	}
	seen := fmt.Sprintf("uid %d already has %d tasks%s on this host outside this container (the kernel counts %d%s, this container's /proc shows %d)", uid, outside, more, t.Host, more, t.Here)
	if procs <= 0 {
		return "RLIMIT_NPROC: " + seen + "; runs get no RLIMIT_NPROC here, so they do not count against one, but every process of the uid elsewhere shares the kernel's count; " + fix
	}
	// What a run's tasks may reach: its limit less every task of the uid but the
	// count child (gone by then), the server's own included.
	left := procs - (t.Host - 1)
	if left <= 0 {
		return fmt.Sprintf("RLIMIT_NPROC: %s, and the kernel counts RLIMIT_NPROC per uid across the host: with a run's limit of %d tasks, every run's first fork fails with EAGAIN while they last; %s", seen, procs, fix)
	}
	return fmt.Sprintf("RLIMIT_NPROC: %s, and the kernel counts RLIMIT_NPROC per uid across the host: with the server's %d they leave a run %d of its %d tasks, and more of them make its forks fail with EAGAIN; %s", seen, t.Here-1, left, procs, fix)
}

// checkNproc measures the uid's tasks (countUIDTasks with l.Python) and returns them
// with what the start-up log should say (nprocNote for the runs' RLIMIT_NPROC).
func (l Lockdown) checkNproc(ctx context.Context, uid int) (uidTasks, string) {
	python, err := lookPath(cmp.Or(l.Python, "python3"), "/usr/local/bin:/usr/bin:/bin")
	if err != nil {
		return uidTasks{}, "RLIMIT_NPROC: the uid's tasks on the host not measured: the interpreter: " + err.Error()
	}
	t, err := countUIDTasks(ctx, python)
	if err != nil {
		return uidTasks{}, "RLIMIT_NPROC: the uid's tasks on the host not measured: " + err.Error()
	}
	return t, nprocNote(uid, t, runProcs(l.Pids))
}

// runProcs is the RLIMIT_NPROC of a run with a pids limit of pids (0: none): at most
// the container's pids limit less the server's reserve (limitsFor).
func runProcs(pids int64) int64 {
	if cp := containerPids(); cp > 0 && (pids <= 0 || pids > cp-serverTasks) {
		return max(cp-serverTasks, 1)
	}
	return pids
}
