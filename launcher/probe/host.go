package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// ErrNoHostView: the runner does not see the engine host's processes (it runs in a
// container of its own, or talks to a remote engine), so the outside evidence cannot
// be taken. Runners report such a check as not made, never as passed.
var ErrNoHostView = errors.New("no view of the engine's host")

// Sandbox is a running sandbox container as the engine reports it.
type Sandbox struct {
	ID  string // the container's id
	Pid int    // its init process on the engine's host (inspect's State.Pid)
}

// Host is where the engine host's process and cgroup file systems are mounted in
// this process's view: "/proc" and "/sys/fs/cgroup" on the host itself; tests use a
// fake tree.
type Host struct {
	Proc, Cgroup string
}

// LocalHost is this machine.
var LocalHost = Host{Proc: "/proc", Cgroup: "/sys/fs/cgroup"}

// gVisor's own processes keep a few capabilities, each in a user namespace of its own
// (never the host's): CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER,
// CAP_FSETID (the Gofer and the Sentry serve the container's files), CAP_SYS_CHROOT
// (the Gofer) and CAP_SYS_PTRACE (the Sentry, for its stub processes).
const gvisorCaps = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<18 | 1<<19

// HostEvidence checks a running sandbox from the engine's host: every process of the
// container's cgroup is confined by a seccomp filter and no_new_privs, holds no
// capability in the host's user namespace, and is not in the host's network namespace;
// the program's processes (runc) run as uid 65532 with no capability at all; and the
// container's cgroup carries the configured memory (no swap), pids and CPU limits
// (under gVisor the pids limit there is backend.GVisorHostPids: the program's own
// limit is RLIMIT_NPROC inside). It returns what it saw, one line per process and
// limit, and ErrNoHostView (wrapped) when h does not show the sandbox's processes.
func HostEvidence(h Host, p Params, sb Sandbox) (string, error) {
	procs, cg, err := h.processes(sb)
	if err != nil {
		return "", err
	}
	selfUser, _ := os.Readlink(filepath.Join(h.Proc, "self/ns/user"))
	selfNet, _ := os.Readlink(filepath.Join(h.Proc, "self/ns/net"))
	var seen []string
	var errs []error
	for _, pid := range procs {
		st, err := readStatus(filepath.Join(h.Proc, strconv.Itoa(pid), "status"))
		if err != nil {
			continue // ended meanwhile
		}
		userNS, _ := os.Readlink(filepath.Join(h.Proc, strconv.Itoa(pid), "ns/user"))
		netNS, _ := os.Readlink(filepath.Join(h.Proc, strconv.Itoa(pid), "ns/net"))
		capEff, _ := strconv.ParseUint(st["CapEff"], 16, 64)
		capBnd, _ := strconv.ParseUint(st["CapBnd"], 16, 64)
		ns := "own user namespace"
		if userNS == selfUser {
			ns = "host's user namespace"
		}
		what := fmt.Sprintf("pid %d (%s): Seccomp %s, NoNewPrivs %s, Uid %s, CapEff %s, %s", pid, st["Name"], st["Seccomp"], st["NoNewPrivs"], strings.Join(strings.Fields(st["Uid"]), "/"), st["CapEff"], ns)
		seen = append(seen, what)
		if st["Seccomp"] != "2" {
			errs = append(errs, fmt.Errorf("%s: Seccomp %s, want 2 (filter)", what, st["Seccomp"]))
		}
		if st["NoNewPrivs"] != "1" {
			errs = append(errs, fmt.Errorf("%s: NoNewPrivs %s, want 1", what, st["NoNewPrivs"]))
		}
		if selfNet != "" && netNS == selfNet {
			errs = append(errs, fmt.Errorf("%s: in the host's network namespace %s", what, netNS))
		}
		if p.GVisor {
			if selfUser != "" && userNS == selfUser && capEff != 0 {
				errs = append(errs, fmt.Errorf("%s: holds capabilities %#x in the host's user namespace", what, capEff))
			}
			if capEff&^gvisorCaps != 0 || capBnd&^gvisorCaps != 0 {
				errs = append(errs, fmt.Errorf("%s: capabilities %#x (bounding %#x) beyond gVisor's own %#x", what, capEff, capBnd, uint64(gvisorCaps)))
			}
			continue
		}
		if ids := strings.Fields(st["Uid"]); len(ids) != 4 || slices.ContainsFunc(ids, func(s string) bool { return s != strconv.Itoa(SandboxUID) }) {
			errs = append(errs, fmt.Errorf("%s: Uid %q, want all %d", what, st["Uid"], SandboxUID))
		}
		for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if v, _ := strconv.ParseUint(st[k], 16, 64); v != 0 || st[k] == "" {
				errs = append(errs, fmt.Errorf("%s: %s %q, want 0", what, k, st[k]))
			}
		}
	}
	if len(seen) == 0 {
		return "", fmt.Errorf("%w: no process of container %.12s readable under %s", ErrNoHostView, sb.ID, h.Proc)
	}
	lim, limErrs := h.cgroupLimits(cg, p, "")
	seen = append(seen, lim...)
	errs = append(errs, limErrs...)
	return strings.Join(seen, "\n"), errors.Join(errs...)
}

// processes lists the host pids in the sandbox's cgroup and returns that cgroup's
// per-controller paths (v1: controller -> path; v2: "" -> path).
func (h Host) processes(sb Sandbox) ([]int, map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(h.Proc, strconv.Itoa(sb.Pid), "cgroup"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading the cgroup of pid %d: %w", ErrNoHostView, sb.Pid, err)
	}
	cg := map[string]string{}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			cg[c] = parts[2]
		}
	}
	path := cg["pids"]
	dir := filepath.Join(h.Cgroup, "pids", path)
	if path == "" {
		path = cg[""]
		dir = filepath.Join(h.Cgroup, path)
	}
	if !strings.Contains(path, sb.ID) {
		// Another process with that number: this is not the engine's host.
		return nil, nil, fmt.Errorf("%w: pid %d is not in container %.12s's cgroup (%q)", ErrNoHostView, sb.Pid, sb.ID, path)
	}
	data, err = os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: listing the processes of %s: %w", ErrNoHostView, dir, err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, cg, nil
}

// cgroupLimits compares the container's cgroup limits on the host with p: those whose
// name starts with only ("" for all).
func (h Host) cgroupLimits(cg map[string]string, p Params, only string) ([]string, []error) {
	wantPids := p.Pids
	if p.GVisor {
		wantPids = backend.GVisorHostPids(p.Pids)
	}
	mem, quota := strconv.FormatInt(p.Memory, 10), strconv.FormatInt(int64(p.CPUs*100000+0.5), 10)
	type limit struct{ what, file, want string }
	var limits []limit
	if cg["memory"] != "" { // cgroup v1
		f := func(ctrl, file string) string { return filepath.Join(h.Cgroup, ctrl, cg[ctrl], file) }
		limits = []limit{
			{"memory", f("memory", "memory.limit_in_bytes"), mem},
			{"memory+swap", f("memory", "memory.memsw.limit_in_bytes"), mem}, // absent without swap accounting
			{"pids", f("pids", "pids.max"), strconv.FormatInt(wantPids, 10)},
			{"cpu quota", f("cpu", "cpu.cfs_quota_us"), quota},
			{"cpu period", f("cpu", "cpu.cfs_period_us"), "100000"},
		}
	} else {
		f := func(file string) string { return filepath.Join(h.Cgroup, cg[""], file) }
		limits = []limit{
			{"memory", f("memory.max"), mem},
			{"swap", f("memory.swap.max"), "0"},
			{"pids", f("pids.max"), strconv.FormatInt(wantPids, 10)},
			{"cpu", f("cpu.max"), quota + " 100000"},
		}
	}
	var seen []string
	var errs []error
	for _, l := range limits {
		if !strings.HasPrefix(l.what, only) {
			continue
		}
		data, err := os.ReadFile(l.file)
		if err != nil {
			if l.what == "memory+swap" && errors.Is(err, os.ErrNotExist) {
				seen = append(seen, "memory+swap: no "+l.file+" (swap accounting off)")
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %w", l.what, err))
			continue
		}
		got := strings.TrimSpace(string(data))
		seen = append(seen, fmt.Sprintf("%s: %s = %s", l.what, l.file, got))
		if got != l.want {
			errs = append(errs, fmt.Errorf("%s: %s = %s, want %s", l.what, l.file, got, l.want))
		}
	}
	return seen, errs
}

func readStatus(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(line, ":")
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// cpuWindow is how long HostCPU measures at a time, and cpuWindows how many windows it
// takes at most when the host leaves the quota's throttle unseen (below).
var (
	cpuWindow  = 2 * time.Second
	cpuWindows = 4
)

// cpuWait waits out a window; the tests' fake host moves its counters there.
var cpuWait = func(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cpuWindow):
		return nil
	}
}

// hostIdleShare is the share of the host's CPU time that must stay idle during an
// unthrottled window for that window to prove a missing cap: below it the host was
// saturated by others, and the burn's fair share fell under the quota by itself.
const hostIdleShare = 0.1

// HostCPU measures, from the engine's host, the CPU time the sandbox's cgroup gets
// while its program keeps more processes busy than the quota allows: at most
// CPUs*wall*1.2 + 0.05 s in each window of cpuWindow, by the cgroup's own accounting
// (cpuacct.usage, or cpu.stat's usage_usec on cgroup v2). Under gVisor this is the
// only measure: the guest's CPU clocks are gVisor's.
//
// So that a missing quota cannot pass unnoticed, a window must also show the quota at
// work: the cgroup throttled at least once. A window without a throttle while the host
// had CPU time idle (hostIdleShare of it or more, by the host's /proc/stat) fails: the
// busy processes could have taken that time, and only a missing cap lets them run
// unthrottled with CPUs to spare. A window without a throttle on a saturated host
// proves nothing either way (others took the CPUs first, and the burn's share stayed
// under the quota: seen in CI beside a Kubernetes step, 1.68 CPU-s in 2 s at CPUs=1,
// never throttled), so HostCPU measures another, up to cpuWindows; when every window
// was saturated, the cgroup's own CPU limit must read as configured.
func HostCPU(ctx context.Context, h Host, p Params, sb Sandbox) (string, error) {
	_, cg, err := h.processes(sb)
	if err != nil {
		return "", err
	}
	usageFile, statFile, scale := filepath.Join(h.Cgroup, "cpuacct", cg["cpuacct"], "cpuacct.usage"), filepath.Join(h.Cgroup, "cpu", cg["cpu"], "cpu.stat"), 1e9
	if cg["cpu"] == "" && cg["cpuacct"] == "" { // cgroup v2
		statFile = filepath.Join(h.Cgroup, cg[""], "cpu.stat")
		usageFile, scale = "", 1e6
	}
	type sample struct {
		at              time.Time
		used, idle      float64 // CPU-s: the cgroup's use, the host's idle (all CPUs)
		throttled, cpus int64
	}
	take := func() (s sample, err error) {
		s.at = time.Now()
		stat, err := os.ReadFile(statFile)
		if err != nil {
			return s, fmt.Errorf("reading the sandbox's CPU accounting: %w", err)
		}
		for line := range strings.Lines(string(stat)) {
			k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "nr_throttled":
				s.throttled = n
			case "usage_usec":
				s.used = float64(n) / scale
			}
		}
		if usageFile != "" {
			data, err := os.ReadFile(usageFile)
			if err != nil {
				return s, fmt.Errorf("reading the sandbox's CPU accounting: %w", err)
			}
			n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			if err != nil {
				return s, fmt.Errorf("reading %s: %w", usageFile, err)
			}
			s.used = float64(n) / scale
		}
		s.idle, s.cpus, err = hostIdle(filepath.Join(h.Proc, "stat"))
		return s, err
	}
	var seen []string
	ev := func() string { return strings.Join(seen, "\n") }
	s0, err := take()
	if err != nil {
		return "", err
	}
	for window := 1; ; window++ {
		if err := cpuWait(ctx); err != nil {
			return ev(), err
		}
		s1, err := take()
		if err != nil {
			return ev(), err
		}
		wall := s1.at.Sub(s0.at).Seconds()
		used, th, idle := s1.used-s0.used, s1.throttled-s0.throttled, s1.idle-s0.idle
		allowed := p.CPUs*wall*1.2 + 0.05
		seen = append(seen, fmt.Sprintf("window %d: %.2f CPU-s in %.2f s wall by %s (allowed %.2f for CPUs=%.2f), throttled %d times; the host's %d CPUs idle %.2f CPU-s",
			window, used, wall, cmp.Or(usageFile, statFile), allowed, p.CPUs, th, s1.cpus, idle))
		if used <= 0.05 {
			return ev(), fmt.Errorf("the busy processes got %.2f CPU-s: the burn did not run, nothing is measured", used)
		}
		if used > allowed {
			return ev(), fmt.Errorf("busy processes got %.2f CPU-s in %.2f s, want at most %.2f (CPUs=%.2f)", used, wall, allowed, p.CPUs)
		}
		// With no more CPUs than the quota, nothing is there to throttle.
		if th > 0 || p.CPUs >= float64(runtime.NumCPU()) {
			return ev(), nil
		}
		if idle >= hostIdleShare*float64(s1.cpus)*wall {
			return ev(), fmt.Errorf("%.2f CPU-s in %.2f s, never throttled, while the host's CPUs were idle %.2f CPU-s: nothing capped the busy processes at CPUs=%.2f", used, wall, idle, p.CPUs)
		}
		if window == cpuWindows {
			lim, errs := h.cgroupLimits(cg, p, "cpu")
			seen = append(seen, fmt.Sprintf("the host was saturated in all %d windows: the quota's throttle was not seen; the cgroup's own limit:", window))
			seen = append(seen, lim...)
			return ev(), errors.Join(errs...)
		}
		s0 = s1
	}
}

// hostIdle reads the host's idle CPU time (idle and iowait, all CPUs) from its
// /proc/stat, in seconds, and how many CPUs it counts.
func hostIdle(path string) (idle float64, cpus int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the host's CPU time: %w", err)
	}
	found := false
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		switch {
		case len(f) > 5 && f[0] == "cpu":
			for _, v := range f[4:6] { // idle, iowait
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, 0, fmt.Errorf("reading the host's CPU time: %s: %q: %w", path, line, err)
				}
				idle += float64(n) / userHZ
			}
			found = true
		case len(f) > 0 && strings.HasPrefix(f[0], "cpu") && f[0] != "cpu":
			cpus++
		}
	}
	if !found || cpus == 0 {
		return 0, 0, fmt.Errorf("reading the host's CPU time: no cpu lines in %s", path)
	}
	return idle, cpus, nil
}

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux ABI we run on.
const userHZ = 100
