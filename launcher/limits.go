package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrLimitsNotEnforced: the engine accepted a limit but does not apply it (rootless
// Podman on cgroup v1 drops memory, pids and CPU limits without an error).
var ErrLimitsNotEnforced = errors.New("the engine does not enforce the configured limits")

// limitsProgram reads, from inside a sandbox, the limits its cgroups actually carry
// (cgroup v2 first, then v1). -1 means unlimited, -2 not found. When the sandbox's own
// cgroup shows no pids limit, the limit may sit on a parent it cannot see (Kubernetes
// sets the kubelet's podPidsLimit on the pod's cgroup, not the container's): the program
// then measures it, starting threads (each counts as a task) until the kernel refuses,
// at most pidsProbeMax; reaching that counts as unlimited.
const limitsProgram = `
import json, os, threading
def read(*paths):
    for p in paths:
        try:
            with open(p) as f:
                return f.read().split()
        except OSError:
            pass
    return None
def num(v):
    if v is None: return -2
    if v[0] == "max": return -1
    n = int(v[0])
    return -1 if n >= 1 << 62 else n
mem = num(read("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"))
pids = num(read("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"))
measured = False
if pids < 0:
    measured, stop, n = True, threading.Event(), 1
    threading.stack_size(65536)
    try:
        while n < PIDS_PROBE_MAX:
            threading.Thread(target=stop.wait, daemon=True).start()
            n += 1
    except RuntimeError:
        pids = n
    stop.set()
cpu = read("/sys/fs/cgroup/cpu.max")
if cpu:
    quota, period = (-1 if cpu[0] == "max" else int(cpu[0])), int(cpu[1])
else:
    q, p = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"), read("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us")
    quota, period = (int(q[0]) if q else -2), (int(p[0]) if p else 100000)
print(json.dumps({"memory": mem, "pids": pids, "pids_measured": measured, "cpu_quota": quota, "cpu_period": period}))
`

// pidsProbeMax bounds the threads the limits program starts to find a pids limit it
// cannot read.
const pidsProbeMax = 4096

// LimitsHinter is implemented by a backend that can tell the deployer where its limits
// come from, for the refusal when one is not enforced.
type LimitsHinter interface {
	LimitsHint() string
}

// Limits are the limits a sandbox's cgroups carry, as seen from inside.
type Limits struct {
	Memory int64 `json:"memory"` // bytes; -1 unlimited, -2 not visible
	Pids   int64 `json:"pids"`
	// PidsMeasured: no pids limit was visible, Pids is how many tasks the sandbox could
	// run (itself included) before the kernel refused another.
	PidsMeasured bool  `json:"pids_measured"`
	CPUQuota     int64 `json:"cpu_quota"` // microseconds per period; -1 unlimited
	CPUPeriod    int64 `json:"cpu_period"`
}

// MeasureLimits runs a sandbox that reports the limits it actually runs under.
func (l *Launcher) MeasureLimits(ctx context.Context) (Limits, error) {
	code := strings.Replace(limitsProgram, "PIDS_PROBE_MAX", strconv.Itoa(pidsProbeMax), 1)
	res, err := l.Run(ctx, Job{Code: code, Timeout: 20 * time.Second, internal: true})
	if err != nil {
		return Limits{}, fmt.Errorf("measuring sandbox limits: %w", err)
	}
	var lim Limits
	if res.ExitCode != 0 || json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &lim) != nil {
		return Limits{}, fmt.Errorf("%w: measuring sandbox limits: exit %d: %s", ErrSandbox, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return lim, nil
}

// Unenforced lists the configured limits that lim shows are not applied.
func (l *Launcher) Unenforced(lim Limits) []string {
	o := l.opts
	var bad []string
	if lim.Memory < 0 || lim.Memory > o.Memory {
		bad = append(bad, fmt.Sprintf("memory (configured %d bytes, sandbox sees %s)", o.Memory, limitText(lim.Memory)))
	}
	if lim.Pids < 0 || lim.Pids > o.Pids {
		how := "sees"
		if lim.PidsMeasured {
			how = "could start"
		}
		bad = append(bad, fmt.Sprintf("pids (configured %d, sandbox %s %s)", o.Pids, how, limitText(lim.Pids)))
	}
	if lim.CPUQuota < 0 || lim.CPUPeriod <= 0 || float64(lim.CPUQuota)/float64(lim.CPUPeriod) > o.CPUs*1.01 {
		bad = append(bad, fmt.Sprintf("cpus (configured %g, sandbox sees quota %s per %d µs)", o.CPUs, limitText(lim.CPUQuota), lim.CPUPeriod))
	}
	return bad
}

// VerifyLimits fails with ErrLimitsNotEnforced naming every limit the engine does
// not apply.
func (l *Launcher) VerifyLimits(ctx context.Context) error {
	lim, err := l.MeasureLimits(ctx)
	if err != nil {
		return err
	}
	if bad := l.Unenforced(lim); len(bad) > 0 {
		hint := "rootless Podman needs cgroup v2 with delegation to apply them"
		if h, ok := l.be.(LimitsHinter); ok {
			hint = h.LimitsHint()
		}
		return fmt.Errorf("%w: %s (%s)", ErrLimitsNotEnforced, strings.Join(bad, "; "), hint)
	}
	return nil
}

func limitText(v int64) string {
	switch v {
	case -1:
		return "unlimited"
	case -2:
		return "nothing (no cgroup file visible)"
	}
	return fmt.Sprint(v)
}
