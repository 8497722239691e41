from _composed import GVISOR, check, denied, errno, finish, mount_of, note, os  # defined by what probe.go puts before this file; the line is dropped
def write(path):
    # Opening for writing is the permission check; nothing is ever written, so that a
    # broken sandbox does not get the host's tunables changed by its own probe.
    os.close(os.open(path, os.O_WRONLY))
    return "opened for writing"
if GVISOR:
    # gVisor's /proc/sys holds a few emulated entries of its own kernel, under a /proc
    # that is one read-write mount: every file there must refuse a writer.
    found = []
    for d, _, names in os.walk("/proc/sys"):
        for n in names:
            found.append(os.path.join(d, n))
    check(found, "no file under /proc/sys")
    for p in found:
        denied("write " + p, lambda: write(p), errno.EROFS, errno.EACCES, errno.EPERM)
    note("gVisor: /proc/sys is gVisor's emulation (%d files, each refused to a writer), /proc one read-write mount" % len(found))
    m = mount_of("/sys")
    check(m and "ro" in m[1], "/sys is not a read-only mount: %r" % (m,))
    finish()
# These exist in every kernel...
for p in ("/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
          "/proc/sys/net/ipv4/ip_forward", "/proc/sys/fs/file-max"):
    check(os.path.exists(p), "%s does not exist" % p)
    denied("write " + p, lambda: write(p), errno.EROFS, errno.EACCES)
# ...these depend on its configuration (modules, magic SysRq, hotplug, power).
for p in ("/proc/sys/kernel/modprobe", "/proc/sysrq-trigger", "/sys/kernel/uevent_helper",
          "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state"):
    if os.path.exists(p):
        denied("write " + p, lambda: write(p), errno.EROFS, errno.EACCES)
m = mount_of("/proc/sys")
check(m and m[0] == "/proc/sys" and "ro" in m[1], "/proc/sys is not a read-only mount: %r" % (m,))
m = mount_of("/sys")
check(m and "ro" in m[1], "/sys is not a read-only mount: %r" % (m,))
finish()
