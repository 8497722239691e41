from _composed import GVISOR, MEMORY, PROCESS, check, fail, finish, note, os  # defined by what probe.go puts before this file; the line is dropped
def read(path):
    with open(path) as f:
        return f.read().strip()


def host_swap_kb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("SwapTotal:"):
                return int(line.split()[1])
    return None


def no_swap_check(ok, what):
    """Swap allowed beyond the memory limit fails, except for the process backend
    (standalone mode) on a host with no swap at all: there no run can swap, and its
    start-up check passes the same case with a warning (docs/standalone.md)."""
    if ok:
        return
    if PROCESS and host_swap_kb() == 0:
        note("%s, but the host has no swap (SwapTotal 0 kB): no run can swap" % what)
        return
    check(False, what)
if os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    lim = int(read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
    check(lim == MEMORY, "memory.limit_in_bytes = %d, want %d" % (lim, MEMORY))
    p = "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
    if os.path.exists(p):  # absent when the host has swap accounting off
        sw = int(read(p))
        no_swap_check(sw == MEMORY, "memory.memsw.limit_in_bytes = %d, want %d (no swap)" % (sw, MEMORY))
    else:
        print("note: no memory.memsw.limit_in_bytes (swap accounting off)")
    OOM = ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")
elif os.path.exists("/sys/fs/cgroup/memory.max"):
    lim = read("/sys/fs/cgroup/memory.max")
    check(lim == str(MEMORY), "memory.max = %s, want %d" % (lim, MEMORY))
    if os.path.exists("/sys/fs/cgroup/memory.swap.max"):
        sw = read("/sys/fs/cgroup/memory.swap.max")
        no_swap_check(sw == "0", "memory.swap.max = %s, want 0" % sw)
    OOM = ("/sys/fs/cgroup/memory.events", "oom_kill")
else:
    fail("no memory cgroup limit visible")
    finish()


if GVISOR and not os.path.exists(OOM[0]):
    # gVisor's kernel applies the limit itself (it kills in the sandbox, not the host's
    # OOM killer) and keeps no OOM counter.
    note("gVisor: no OOM counter (%s); the kill is seen by its signal" % OOM[0])
    OOM = None


def oom_kills():
    if OOM is None:
        return 0
    with open(OOM[0]) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k == OOM[1]:
                return int(v)
    return 0


def hog(limit):
    chunks, got, step = [], 0, 8 << 20
    while got < limit:
        chunks.append(b"\1" * step)  # filled, so every page is touched
        got += step
    return got

