package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeHost writes a /proc and a cgroup v1 tree for one container whose processes have
// the given status fields.
func fakeHost(t *testing.T, id string, procs map[string]map[string]string, limits map[string]string) Host {
	t.Helper()
	root := t.TempDir()
	h := Host{Proc: filepath.Join(root, "proc"), Cgroup: filepath.Join(root, "cgroup")}
	write := func(path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(path, target string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(h.Proc, "self/ns/user"), "user:[1]")
	link(filepath.Join(h.Proc, "self/ns/net"), "net:[1]")
	cg := "/docker/" + id
	var pids []string
	for pid, st := range procs {
		pids = append(pids, pid)
		var b strings.Builder
		for k, v := range st {
			b.WriteString(k + ":\t" + v + "\n")
		}
		write(filepath.Join(h.Proc, pid, "status"), b.String())
		write(filepath.Join(h.Proc, pid, "cgroup"), "8:pids:"+cg+"\n4:memory:"+cg+"\n2:cpuacct:"+cg+"\n1:cpu:"+cg+"\n0::/\n")
		link(filepath.Join(h.Proc, pid, "ns/user"), st["_userns"])
		link(filepath.Join(h.Proc, pid, "ns/net"), "net:[2]")
	}
	write(filepath.Join(h.Cgroup, "pids", cg, "cgroup.procs"), strings.Join(pids, "\n")+"\n")
	for file, v := range limits {
		ctrl := strings.SplitN(file, ".", 2)[0]
		write(filepath.Join(h.Cgroup, ctrl, cg, file), v+"\n")
	}
	return h
}

func TestHostEvidence(t *testing.T) {
	id := strings.Repeat("ab", 32)
	p := Params{Memory: 256 << 20, Pids: 128, CPUs: 1}
	runcProc := map[string]string{"Name": "python3", "Seccomp": "2", "NoNewPrivs": "1", "Uid": "65532\t65532\t65532\t65532",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000", "CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "_userns": "user:[1]"}
	gvisorProc := map[string]string{"Name": "exe", "Seccomp": "2", "NoNewPrivs": "1", "Uid": "0\t0\t0\t0",
		"CapEff": "000000000008001f", "CapBnd": "000000000008001f", "_userns": "user:[7]"}
	limits := map[string]string{"memory.limit_in_bytes": "268435456", "memory.memsw.limit_in_bytes": "268435456",
		"pids.max": "128", "cpu.cfs_quota_us": "100000", "cpu.cfs_period_us": "100000"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for a, b := range m {
			out[a] = b
		}
		out[k] = v
		return out
	}
	gp := p
	gp.GVisor = true
	for _, tt := range []struct {
		name   string
		p      Params
		procs  map[string]map[string]string
		limits map[string]string
		want   string // "" passes; else a substring of the error
	}{
		{"runc holds", p, map[string]map[string]string{"10": runcProc}, limits, ""},
		{"gvisor holds", gp, map[string]map[string]string{"10": gvisorProc, "11": gvisorProc}, with(limits, "pids.max", "1088"), ""},
		{"no seccomp", p, map[string]map[string]string{"10": with(runcProc, "Seccomp", "0")}, limits, "want 2 (filter)"},
		{"no no_new_privs", p, map[string]map[string]string{"10": with(runcProc, "NoNewPrivs", "0")}, limits, "NoNewPrivs 0, want 1"},
		{"root", p, map[string]map[string]string{"10": with(runcProc, "Uid", "0\t0\t0\t0")}, limits, "want all 65532"},
		{"a capability", p, map[string]map[string]string{"10": with(runcProc, "CapBnd", "0000000000200000")}, limits, "CapBnd"},
		{"gvisor with CAP_SYS_ADMIN", gp, map[string]map[string]string{"10": with(gvisorProc, "CapEff", "0000000000280000")}, with(limits, "pids.max", "1088"), "beyond gVisor's own"},
		{"gvisor caps in the host's namespace", gp, map[string]map[string]string{"10": with(gvisorProc, "_userns", "user:[1]")}, with(limits, "pids.max", "1088"), "host's user namespace"},
		{"memory unlimited", p, map[string]map[string]string{"10": runcProc}, with(limits, "memory.limit_in_bytes", "9223372036854771712"), "memory.limit_in_bytes"},
		{"swap allowed", p, map[string]map[string]string{"10": runcProc}, with(limits, "memory.memsw.limit_in_bytes", "536870912"), "memory+swap"},
		{"pids unlimited", p, map[string]map[string]string{"10": runcProc}, with(limits, "pids.max", "max"), "pids.max = max"},
		{"gvisor pids as runc's", gp, map[string]map[string]string{"10": gvisorProc}, limits, "pids.max = 128, want 1088"},
		{"no cpu quota", p, map[string]map[string]string{"10": runcProc}, with(limits, "cpu.cfs_quota_us", "-1"), "cfs_quota_us = -1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := fakeHost(t, id, tt.procs, tt.limits)
			ev, err := HostEvidence(h, tt.p, Sandbox{ID: id, Pid: 10})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want it to hold; evidence:\n%s", err, ev)
				}
				if !strings.Contains(ev, "pid 10") || !strings.Contains(ev, "pids.max") {
					t.Errorf("evidence lacks the process or the limits:\n%s", ev)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrNoHostView) {
				t.Errorf("got %v, want a failure mentioning %q", err, tt.want)
			}
		})
	}
}

func TestHostEvidenceNoHostView(t *testing.T) {
	id := strings.Repeat("cd", 32)
	h := fakeHost(t, strings.Repeat("ef", 32), map[string]map[string]string{"10": {"Seccomp": "2", "_userns": "user:[1]"}}, nil)
	for name, sb := range map[string]Sandbox{
		"another container's pid": {ID: id, Pid: 10},
		"no such pid":             {ID: id, Pid: 99},
	} {
		if _, err := HostEvidence(h, Params{}, sb); !errors.Is(err, ErrNoHostView) {
			t.Errorf("%s: got %v, want ErrNoHostView", name, err)
		}
	}
}

func TestHostCPU(t *testing.T) {
	defer func(w time.Duration, n int, wait func(context.Context) error) {
		cpuWindow, cpuWindows, cpuWait = w, n, wait
	}(cpuWindow, cpuWindows, cpuWait)
	cpuWindow, cpuWindows = 200*time.Millisecond, 3
	id := strings.Repeat("ab", 32)
	p := Params{Memory: 256 << 20, Pids: 128, CPUs: 0.5} // allowed 0.17 CPU-s a window
	// step is what one window adds: the cgroup's CPU time and throttles, and the host's
	// idle time in USER_HZ ticks (2 CPUs for 0.2 s are 40 ticks; from 4 on, an
	// unthrottled window of 0.2 s proves a missing cap, from 8 one of 0.4 s: a slow
	// machine's windows run long).
	type step struct{ usedNs, throttled, idleTicks int64 }
	quota := map[string]string{"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"}
	for _, tt := range []struct {
		name     string
		steps    []step
		limits   map[string]string
		want     string // "" holds; else a word of the failure
		measured int    // windows measured
	}{
		{"within the quota, throttled", []step{{100_000_000, 2, 20}}, quota, "", 1},
		{"no burn", []step{{0, 0, 40}}, quota, "did not run", 1},
		{"over the quota", []step{{600_000_000, 2, 0}}, quota, "want at most", 1},
		{"never throttled with CPUs idle", []step{{100_000_000, 0, 20}}, quota, "never throttled", 1},
		{"never throttled, a little idle", []step{{100_000_000, 0, 8}}, quota, "never throttled", 1},
		// Others took the CPUs (CI, beside a Kubernetes step): measured again.
		{"saturated, then throttled", []step{{90_000_000, 0, 1}, {100_000_000, 3, 15}}, quota, "", 2},
		{"saturated, then over the quota", []step{{90_000_000, 0, 0}, {600_000_000, 0, 0}}, quota, "want at most", 2},
		{"saturated, then idle unthrottled", []step{{90_000_000, 0, 0}, {100_000_000, 0, 30}}, quota, "never throttled", 2},
		{"saturated throughout, the quota set", []step{{90_000_000, 0, 0}, {80_000_000, 0, 3}, {85_000_000, 0, 1}}, quota, "", 3},
		{"saturated throughout, no quota", []step{{90_000_000, 0, 0}, {80_000_000, 0, 3}, {85_000_000, 0, 1}},
			map[string]string{"cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"}, "cpu quota", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := fakeHost(t, id, map[string]map[string]string{"10": {"Seccomp": "2", "_userns": "user:[1]"}}, tt.limits)
			usage := filepath.Join(h.Cgroup, "cpuacct", "docker", id, "cpuacct.usage")
			stat := filepath.Join(h.Cgroup, "cpu", "docker", id, "cpu.stat")
			hostStat := filepath.Join(h.Proc, "stat")
			write := func(path, data string) {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Error(err)
				}
				if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Error(err)
				}
			}
			used, throttled, idle := int64(1_000_000_000), int64(3), int64(5000)
			set := func() {
				write(usage, strconv.FormatInt(used, 10)+"\n")
				write(stat, "nr_periods 10\nnr_throttled "+strconv.FormatInt(throttled, 10)+"\nthrottled_time 5\n")
				write(hostStat, fmt.Sprintf("cpu  100 0 50 %d 7 0 0 0 0 0\ncpu0 50 0 25 %d 3 0 0 0 0 0\ncpu1 50 0 25 %d 4 0 0 0 0 0\nintr 1\n", idle, idle/2, idle/2))
			}
			set()
			measured := 0
			cpuWait = func(ctx context.Context) error {
				time.Sleep(cpuWindow)
				if measured < len(tt.steps) {
					s := tt.steps[measured]
					used, throttled, idle = used+s.usedNs, throttled+s.throttled, idle+s.idleTicks
				}
				measured++
				set()
				return ctx.Err()
			}
			ev, err := HostCPU(t.Context(), h, p, Sandbox{ID: id, Pid: 10})
			if measured != tt.measured {
				t.Errorf("measured %d windows, want %d (%s)", measured, tt.measured, ev)
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want it to hold (%s)", err, ev)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v (%s), want a failure mentioning %q", err, ev, tt.want)
			}
		})
	}
}
