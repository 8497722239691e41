from _composed import GVISOR, MEMORY, TMPFS_SIZE, TOKEN, check, denied, ename, errno, fail, finish, mount_of, note, os  # defined by what probe.go puts before this file; the line is dropped
import mmap, shutil, subprocess
for d in ("/tmp", "/dev/shm"):
    m = mount_of(d)
    check(m and m[0] == d, "%s is not a mount of its own: %r" % (d, m))
    if not m:
        continue
    check(m[2] == "tmpfs", "%s is %s, want tmpfs" % (d, m[2]))
    if GVISOR and "nodev" not in m[1]:
        note("gVisor: %s shows no nodev (gVisor's tmpfs has no device files; mknod needs CAP_MKNOD, dropped)" % d)
        m[1].append("nodev")
    for opt in ("rw", "noexec", "nosuid", "nodev"):
        check(opt in m[1], "%s lacks %s: %s" % (d, opt, ",".join(m[1])))
    sv = os.statvfs(d)
    total = sv.f_blocks * sv.f_frsize
    check(total == TMPFS_SIZE, "%s is %d bytes, want %d" % (d, total, TMPFS_SIZE))

    path = d + "/" + TOKEN + ".sh"
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho escaped\n")
    os.chmod(path, 0o755)
    with open(path) as f:
        check(f.read().endswith("escaped\n"), "%s: cannot read back what was written" % path)
    denied("exec shebang script in " + d, lambda: subprocess.run([path], capture_output=True), errno.EACCES, errno.EPERM)
    elf = d + "/" + TOKEN + ".true"
    shutil.copy("/bin/true", elf)
    os.chmod(elf, 0o755)
    denied("exec ELF copy in " + d, lambda: subprocess.run([elf]), errno.EACCES, errno.EPERM)
    def mmap_exec():
        with open(elf, "rb") as f:
            return mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
    denied("mmap PROT_EXEC of a file in " + d, mmap_exec, errno.EPERM, errno.EACCES)
    os.unlink(path)
    os.unlink(elf)

# Fill /tmp: the writes must stop at TmpfsSize with ENOSPC. tmpfs pages count against
# the memory limit, so this is only done when the limit leaves room for it.
if TMPFS_SIZE + 48 * 2**20 < MEMORY:
    big, written, chunk = "/tmp/" + TOKEN + ".fill", 0, b"\0" * (256 << 10)
    try:
        with open(big, "wb", buffering=0) as f:
            while written <= TMPFS_SIZE + 8 * 2**20:
                written += f.write(chunk)
        fail("wrote %d bytes to /tmp, more than its %d" % (written, TMPFS_SIZE))
    except OSError as e:
        check(e.errno == errno.ENOSPC, "filling /tmp failed with %s, want ENOSPC" % ename(e.errno))
    finally:
        size = os.path.getsize(big) if os.path.exists(big) else 0
        if os.path.exists(big):
            os.unlink(big)
    check(TMPFS_SIZE - 2**20 <= size <= TMPFS_SIZE, "/tmp took %d bytes, want about %d" % (size, TMPFS_SIZE))
    print("/tmp filled at %d bytes (ENOSPC)" % size)
else:
    print("/tmp fill skipped: TmpfsSize %d is too close to Memory %d" % (TMPFS_SIZE, MEMORY))
finish()
