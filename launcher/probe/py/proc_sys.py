from _composed import check, denied, errno, finish, mount_of, os  # defined by what probe.go puts before this file; the line is dropped
def write(path):
    # Opening for writing is the permission check; nothing is ever written, so that a
    # broken sandbox does not get the host's tunables changed by its own probe.
    os.close(os.open(path, os.O_WRONLY))
    return "opened for writing"
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
