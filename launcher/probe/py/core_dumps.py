from _composed import check, fail, finish, note, os  # defined by what probe.go puts before this file; the line is dropped
import resource
import signal

# RLIMIT_CORE must be 0, soft and hard, here and in the bootstrap (the parent), so that
# no crash hands the program's memory to a host core_pattern collector.
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
check((soft, hard) == (0, 0), "getrlimit(RLIMIT_CORE) = (%d, %d), want (0, 0)" % (soft, hard))


def parent_core(pid):
    try:
        with open("/proc/%d/limits" % pid) as f:
            for line in f:
                if line.startswith("Max core file size"):
                    return line.split()[4:6]
    except OSError as e:
        return "unreadable (%s)" % e
    return "absent"


ppid = os.getppid()
v = parent_core(ppid)
check(v == ["0", "0"], "the bootstrap's (pid %d) core file size limit is %s, want 0 0" % (ppid, v))

# The program cannot raise it: the hard limit is 0 and raising a hard limit needs
# CAP_SYS_RESOURCE. CPython turns EPERM and EINVAL into these ValueErrors.
for want, why in (((0, 1), "not allowed to raise maximum limit"),
                  ((1, 1), "not allowed to raise maximum limit"),
                  ((resource.RLIM_INFINITY, resource.RLIM_INFINITY), "not allowed to raise maximum limit"),
                  ((1, 0), "current limit exceeds maximum limit")):
    try:
        resource.setrlimit(resource.RLIMIT_CORE, want)
    except ValueError as e:
        check(str(e) == why, "setrlimit(RLIMIT_CORE, %r): %s, want %s" % (want, e, why))
    except OSError as e:
        fail("setrlimit(RLIMIT_CORE, %r): %s, want %s" % (want, e, why))
    else:
        fail("setrlimit(RLIMIT_CORE, %r) succeeded" % (want,))
check(resource.getrlimit(resource.RLIMIT_CORE) == (0, 0), "RLIMIT_CORE changed to %r" % (resource.getrlimit(resource.RLIMIT_CORE),))

# And a crash dumps nothing: a child that aborts must not be reported as having dumped
# core. With a core_pattern that pipes to a helper the kernel runs the helper whatever
# the limit (it passes the limit on, and systemd-coredump honours it), so the report
# proves nothing there: said in a note.
try:
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
except OSError as e:
    pattern = None
    note("core_pattern unreadable (%s)" % e)
pid = os.fork()
if pid == 0:
    os.chdir("/tmp")
    signal.signal(signal.SIGABRT, signal.SIG_DFL)
    os.abort()
_, st = os.waitpid(pid, 0)
check(os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGABRT, "the aborting child ended with status %#x, want SIGABRT" % st)
if pattern is not None and pattern.startswith("|"):
    note("core_pattern pipes to a helper (%s): the kernel reports core dumped=%s whatever the limit; the limit passed on is 0" % (pattern.split()[0], os.WCOREDUMP(st)))
else:
    check(not os.WCOREDUMP(st), "an aborting child dumped core (core_pattern %r)" % pattern)
finish()
