# Counts the tasks of this process's real uid twice: as the kernel counts them for
# RLIMIT_NPROC (across the whole host, whatever PID namespace this is in), and as this
# container's /proc shows them. The kernel's count is not in /proc: it is found by
# forking under a lowered soft RLIMIT_NPROC, since a fork succeeds exactly when the
# uid has fewer tasks than the soft limit (copy_process). The binary search needs
# about 23 forks. Started by launcher/process/nproc.go; one "key value" line each.
import os, resource

uid = os.getuid()


def here():
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/status" % d) as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
            if int(st["Uid"].split()[0]) == uid:
                n += int(st["Threads"])
        except (OSError, KeyError, ValueError):
            continue  # gone, or a kernel thread
    return n


soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)


def forks(limit):
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, hard))
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
    except BlockingIOError:
        return False
    finally:
        resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
    os.waitpid(pid, 0)
    return True


before = here()
print("here_before", before)
if forks(1):
    # This process is a task of the uid: a fork under RLIMIT_NPROC 1 can only succeed
    # where the limit does not apply (root, CAP_SYS_RESOURCE or CAP_SYS_ADMIN).
    print("unenforced 1")
else:
    top = hard
    if top == resource.RLIM_INFINITY:
        with open("/proc/sys/kernel/pid_max") as f:
            top = int(f.read()) + 1
    if not forks(top):
        print("host_at_least", top)
    else:
        lo, hi = 1, top  # forks(lo) failed, forks(hi) succeeded
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if forks(mid):
                hi = mid
            else:
                lo = mid
        print("host", hi - 1)
print("here_after", here())
