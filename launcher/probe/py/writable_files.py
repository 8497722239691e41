from _composed import check, finish, mountinfo, os, walk  # defined by what probe.go puts before this file; the line is dropped
# Every regular file outside the wiped tmpfs mounts, and every mount of its own that is
# read-write: none may be writable by the sandbox's user. root_fs_read_only looks at
# directories; this looks at files (Kubernetes' /dev/termination-log: a 0666 file bound
# from the node's disk) and at mounts of their own (a volume, a bind).
ALLOWED = ("/tmp", "/dev/shm", "/dev/mqueue")
KERNEL = ("proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "securityfs", "debugfs", "tracefs", "bpf", "nsfs")
files, nfiles = [], 0
for d, entries in walk(ALLOWED):
    for e in entries or ():
        try:
            if not e.is_file(follow_symlinks=False):
                continue
        except OSError:
            continue
        nfiles += 1
        if os.access(e.path, os.W_OK):
            files.append(e.path)
check(not files, "writable files outside the wipe: %s" % sorted(files)[:20])


def under(p, roots):
    return any(p == r or p.startswith(r + "/") for r in roots)


mounts = []
for m in mountinfo():
    point, opts, fstype = m[0], m[1], m[2]
    if "rw" not in opts or fstype in KERNEL or under(point, ("/proc", "/sys") + ALLOWED):
        continue
    if os.access(point, os.W_OK):
        mounts.append(point)
check(not mounts, "writable mounts outside the wipe: %s" % sorted(mounts))
print("checked %d files" % nfiles)
finish()
