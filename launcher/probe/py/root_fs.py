from _composed import TOKEN, check, denied, errno, finish, mount_of, mountinfo, os, walk  # defined by what probe.go puts before this file; the line is dropped
def create(path):
    with open(path, "w") as f:
        f.write("x")
    os.unlink(path)
    return "created"


def mkdir(path):
    os.mkdir(path)
    os.rmdir(path)
    return "made"


def chmod_same(path):
    # The same mode: the permission check without a change.
    os.chmod(path, os.stat(path).st_mode & 0o7777)
    return "changed"
for p in ("/etc/x", "/usr/x", "/x", "/var/tmp/x", "/run/x", "/var/run/x", "/run/lock/x", "/var/x",
          "/home/x", "/root/x", "/opt/x", "/srv/x", "/mnt/x", "/usr/local/bin/x", "/usr/lib/python3/dist-packages/x",
          "/usr/lib/python3.13/x", "/var/cache/x", "/var/lib/x", "/var/log/x"):
    parent = os.path.dirname(p)
    if os.path.isdir(parent):
        denied("create " + p, lambda: create(p), errno.EROFS, errno.EACCES)
denied("append /etc/passwd", lambda: open("/etc/passwd", "a"), errno.EROFS, errno.EACCES)
denied("chmod /usr/bin/python3", lambda: chmod_same(os.path.realpath("/usr/bin/python3")), errno.EROFS, errno.EPERM)
denied("mkdir /etc/x.d", lambda: mkdir("/etc/x.d"), errno.EROFS, errno.EACCES)
m = mount_of("/")
check(m and "ro" in m[1], "/ is not mounted read-only: %r" % (m,))

# Every directory of the filesystem, except the private tmpfs mounts: none may be
# writable. (A read-only mount makes access(W_OK) fail with EROFS even for root.)
ALLOWED = ("/tmp", "/dev/shm", "/dev/mqueue")
writable, ndirs = [], 0
for d, _ in walk(ALLOWED):
    ndirs += 1
    if d != "/" and os.access(d, os.W_OK):
        try:
            create(d + "/" + TOKEN)
            writable.append(d)
        except OSError:
            pass
check(not writable, "writable directories: %s" % writable[:20])
# Mounts of their own (volumes, bind-mounted files such as /etc/hostname): read-only,
# except the private tmpfs ones and the kernel's (/proc, /sys, /dev).
def under(p, roots):
    return any(p == r or p.startswith(r + "/") for r in roots)
rw = [m[0] for m in mountinfo() if "ro" not in m[1] and not under(m[0], ("/proc", "/sys", "/dev") + ALLOWED)]
check(not rw, "writable mounts: %s" % rw)
for p in ALLOWED:
    if os.path.isdir(p):
        check(os.access(p, os.W_OK), "%s is not writable (it should be the private tmpfs)" % p)
print("walked %d directories" % ndirs)
finish()
