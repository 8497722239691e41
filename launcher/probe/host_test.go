package probe

import (
	"errors"
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
	defer func(w time.Duration) { cpuWindow = w }(cpuWindow)
	cpuWindow = 500 * time.Millisecond
	id := strings.Repeat("ab", 32)
	p := Params{Memory: 256 << 20, Pids: 128, CPUs: 0.5}
	for _, tt := range []struct {
		name                 string
		usedNs, throttledAdd int64 // added during the window
		want                 string
	}{
		{"within the quota, throttled", 250_000_000, 4, ""},
		{"no burn", 0, 0, "did not run"},
		{"over the quota", 900_000_000, 4, "want at most"},
		{"the quota's worth, never throttled", 240_000_000, 0, "never throttled"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := fakeHost(t, id, map[string]map[string]string{"10": {"Seccomp": "2", "_userns": "user:[1]"}}, nil)
			usage := filepath.Join(h.Cgroup, "cpuacct", "docker", id, "cpuacct.usage")
			stat := filepath.Join(h.Cgroup, "cpu", "docker", id, "cpu.stat")
			write := func(path, data string) {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Error(err)
				}
				if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Error(err)
				}
			}
			write(usage, "1000000000\n")
			write(stat, "nr_periods 10\nnr_throttled 3\nthrottled_time 5\n")
			go func() {
				time.Sleep(cpuWindow / 2)
				write(usage, strconv.FormatInt(1_000_000_000+tt.usedNs, 10)+"\n")
				write(stat, "nr_periods 20\nnr_throttled "+strconv.FormatInt(3+tt.throttledAdd, 10)+"\nthrottled_time 9\n")
			}()
			ev, err := HostCPU(t.Context(), h, p, Sandbox{ID: id, Pid: 10})
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
