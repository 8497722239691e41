from _composed import GVISOR, TOKEN, check, denied, errno, finish, note, os  # defined by what probe.go puts before this file; the line is dropped
def write(path):
    # Opening for writing is the permission check; nothing is written.
    os.close(os.open(path, os.O_WRONLY))
    return "opened for writing"


def mkdir(path):
    os.mkdir(path)
    os.rmdir(path)
    return "made"
candidates = [
    "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes",
    "/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/memory/notify_on_release",
    "/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "/sys/fs/cgroup/devices/devices.allow",
    "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.swap.max", "/sys/fs/cgroup/pids.max",
    "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/cgroup.subtree_control",
]
present = [p for p in candidates if os.path.exists(p)]
v1 = os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") and os.path.exists("/sys/fs/cgroup/pids/pids.max")
v2 = os.path.exists("/sys/fs/cgroup/memory.max") and os.path.exists("/sys/fs/cgroup/pids.max")
check(v1 or v2, "neither the cgroup v1 nor the v2 limit files are visible: %r" % present)
for p in present:
    denied("write " + p, lambda: write(p), errno.EROFS, errno.EACCES, errno.EPERM)
for d in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu"):
    if os.path.isdir(d):
        denied("mkdir in " + d, lambda: mkdir(d + "/" + TOKEN), errno.EROFS, errno.EACCES, errno.EPERM)
# Every cgroup file system at or under /sys/fs/cgroup is mounted read-only where the
# program sees it (statvfs gives the flags of the visible mount), not merely owned by
# root: a read-only bind of /sys/fs/cgroup copies the controller mounts beneath it.
cgmounts = set()
with open("/proc/self/mountinfo") as f:
    for line in f:
        left, _, right = line.partition(" - ")
        mp = left.split()[4]
        if right.split()[0] in ("cgroup", "cgroup2") and (mp == "/sys/fs/cgroup" or mp.startswith("/sys/fs/cgroup/")):
            cgmounts.add(mp)
check(cgmounts, "no cgroup file system is mounted at or under /sys/fs/cgroup")
for mp in sorted(cgmounts):
    if GVISOR and not os.statvfs(mp).f_flag & os.ST_RDONLY:
        # gVisor's cgroupfs is its own kernel's, not the host's cgroups: the limits
        # that bind are the host's, under the container's cgroup there.
        note("gVisor: %s is gVisor's own cgroupfs, mounted read-write; its files refuse writers (above)" % mp)
        continue
    check(os.statvfs(mp).f_flag & os.ST_RDONLY, "%s is mounted read-write" % mp)
print("checked %d cgroup files and %d cgroup mounts (%s)" % (len(present), len(cgmounts), "v1" if v1 else "v2"))
finish()
