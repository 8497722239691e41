from _composed import check, ename, errno, finish, os  # defined by what probe.go puts before this file; the line is dropped
listed = sorted(int(n) for n in os.listdir("/proc/self/fd"))
# The listing's own descriptor is closed again by now: whatever still answers fstat
# was open before.
still = []
for fd in listed:
    try:
        os.fstat(fd)
        still.append(fd)
    except OSError as e:
        if e.errno != errno.EBADF:
            raise
for fd in (0, 1, 2):
    check(fd in still, "fd %d is not open" % fd)
extra = [fd for fd in still if fd > 2]
def target(fd):
    try:
        return os.readlink("/proc/self/fd/%d" % fd)
    except OSError as e:
        return "?" + ename(e.errno)
check(not extra, "open file descriptors beyond 0-2: %s" % ["%d->%s" % (fd, target(fd)) for fd in extra])
print("open fds:", still)
finish()
