# mcp-exec limits program: prints, as JSON, the limits this sandbox's cgroups carry
# (cgroup v2 first, then v1). -1 means unlimited, -2 not found. Run by
# Launcher.MeasureLimits (limits.go).
import json
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
cpu = read("/sys/fs/cgroup/cpu.max")
if cpu:
    quota, period = (-1 if cpu[0] == "max" else int(cpu[0])), int(cpu[1])
else:
    q, p = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"), read("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us")
    quota, period = (int(q[0]) if q else -2), (int(p[0]) if p else 100000)
print(json.dumps({"memory": mem, "pids": pids, "cpu_quota": quota, "cpu_period": period}))
