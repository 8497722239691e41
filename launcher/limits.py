# mcp-exec limits program: prints, as JSON, the limits this sandbox's cgroups carry
# (cgroup v2 first, then v1). -1 means unlimited, -2 not found. Run by
# Launcher.MeasureLimits (limits.go).
#
# When the sandbox's own cgroup shows no pids limit, the limit may sit on a parent it
# cannot see (Kubernetes sets the kubelet's podPidsLimit on the pod's cgroup, not the
# container's): the program then measures it, starting threads (each counts as a task)
# until the kernel refuses, at most PIDS_PROBE_MAX; reaching that counts as unlimited.
#
# Under gVisor the cgroup files are gVisor's own, showing what runsc was told, and the
# process limit is RLIMIT_NPROC in gVisor's kernel; so the memory and process limits
# are also tried: a child that touches twice the memory limit must be killed, and
# threads must stop at the process limit. What was seen replaces the values read, and
# memory_probe says how the child ended when it was not killed.
#
# io_uring_setup says what that call answers here: the bootstrap's seccomp filter must
# make it EPERM, whatever the runtime's own profile allows.
import json
import os
import sys
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


def gvisor():
    with open("/proc/version") as f:
        return "gvisor" in f.read()


def memory_holds(limit):
    """A child touching twice limit bytes is killed (SIGKILL). Returns None when it was,
    else how the child ended, for the report (memory_probe). A child ended by SIGSEGV or
    SIGBUS is tried once more: under load gVisor has failed a page fault at the limit
    instead of killing (seen once, with a second gVisor sandbox busy on the host); only
    a kill passes."""
    why = memory_child(limit)
    if why is not None and why[1] in (7, 11):
        why = memory_child(limit)
    return None if why is None else why[0]


def memory_child(limit):
    # None when the child was killed, else (how it ended, its signal or 0).
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        got, code = 0, 3
        try:
            chunks = []
            while got < 2 * limit:
                chunks.append(b"\1" * (8 << 20))
                got += 8 << 20
        except MemoryError:
            code = 4
        finally:
            try:
                os.write(w, str(got >> 20).encode())
            finally:
                os._exit(code)
    os.close(w)
    _, st = os.waitpid(pid, 0)
    touched = os.read(r, 32).decode() or "?"
    os.close(r)
    if os.WIFSIGNALED(st) and os.WTERMSIG(st) == 9:
        return None
    if os.WIFSIGNALED(st):
        return "a child touching twice that was ended by signal %d, not SIGKILL" % os.WTERMSIG(st), os.WTERMSIG(st)
    if os.WEXITSTATUS(st) == 4:
        return "a child touching twice that got MemoryError after %s MiB, and was not killed" % touched, 0
    return "a child touched twice that (%s MiB) and exited %d, not killed" % (touched, os.WEXITSTATUS(st)), 0


PIDS_PROBE_MAX = 4096


def threads_stop_at():
    """How many threads could be started, at most PIDS_PROBE_MAX (-1: all of them)."""
    import threading
    threading.stack_size(256 << 10)
    ev, started = threading.Event(), []
    try:
        while len(started) < PIDS_PROBE_MAX:
            t = threading.Thread(target=ev.wait)
            t.start()
            started.append(t)
    except RuntimeError:
        pass
    ev.set()
    for t in started:
        t.join()
    return -1 if len(started) >= PIDS_PROBE_MAX else len(started)


def io_uring_setup():
    """"allowed" (a ring, closed again) or the name of the errno io_uring_setup(1, params) got."""
    import ctypes
    import errno
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(425), ctypes.c_long(1), params)  # 425 on x86_64 and aarch64
    if r >= 0:
        os.close(r)
        return "allowed"
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))


runtime, measured, probe = "linux", False, None
if gvisor():
    import resource
    runtime = "gvisor"
    if mem > 0:
        probe = memory_holds(mem)
        if probe is not None:
            mem = -1
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    stop = threads_stop_at()
    # The bootstrap and this program count as two; threads stop one short of the rest.
    pids = -1 if stop < 0 or nproc < 0 or stop + 2 > nproc else nproc
elif pids < 0:
    # The bootstrap and this program count as two tasks besides the threads.
    stop = threads_stop_at()
    measured, pids = True, (-1 if stop < 0 else stop + 2)
out = {"memory": mem, "pids": pids, "pids_measured": measured,
       "cpu_quota": quota, "cpu_period": period, "runtime": runtime, "io_uring_setup": io_uring_setup()}
if probe is not None:
    out["memory_probe"] = probe
print(json.dumps(out))
sys.stdout.flush()
