from _composed import check, denied, ename, errno, finish, os  # defined by what probe.go puts before this file; the line is dropped
import ctypes, signal, time
libc = ctypes.CDLL(None, use_errno=True)
denied("open /proc/1/fd/1 for write", lambda: open("/proc/1/fd/1", "wb"), errno.EACCES, errno.EPERM)
denied("open /proc/1/mem", lambda: open("/proc/1/mem", "rb"), errno.EACCES, errno.EPERM)
denied("read /proc/1/environ", lambda: open("/proc/1/environ", "rb").read(), errno.EACCES, errno.EPERM)
denied("list /proc/1/fd", lambda: os.listdir("/proc/1/fd"), errno.EACCES, errno.EPERM)
denied("readlink /proc/1/exe", lambda: os.readlink("/proc/1/exe"), errno.EACCES, errno.EPERM)
denied("open /proc/1/root/tmp", lambda: os.listdir("/proc/1/root/tmp"), errno.EACCES, errno.EPERM)
def ptrace(req):
    ctypes.set_errno(0)
    r = libc.ptrace(ctypes.c_long(req), ctypes.c_long(1), None, None)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    # Attached: let PID 1 go again (stopped, then detached), or it would stay stopped
    # and the run would end in a timeout rather than in this probe's verdict.
    if req == 0x4206:
        libc.ptrace(ctypes.c_long(0x4207), ctypes.c_long(1), None, None)  # PTRACE_INTERRUPT
    try:
        os.waitpid(1, 0x40000000)  # __WALL
    except OSError:
        pass
    libc.ptrace(ctypes.c_long(17), ctypes.c_long(1), None, None)  # PTRACE_DETACH
    return "attached"
denied("ptrace(PTRACE_ATTACH, 1)", lambda: ptrace(16), errno.EPERM)
denied("ptrace(PTRACE_SEIZE, 1)", lambda: ptrace(0x4206), errno.EPERM)
def pidfd_getfd():
    libc.syscall.restype = ctypes.c_long
    pidfd = os.pidfd_open(1)
    try:
        ctypes.set_errno(0)
        r = libc.syscall(ctypes.c_long(438), ctypes.c_long(pidfd), ctypes.c_long(1), ctypes.c_long(0))
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        os.close(r)
        return "got PID 1's fd 1 as %d" % r
    finally:
        os.close(pidfd)
denied("pidfd_getfd(PID 1, fd 1)", pidfd_getfd, errno.EPERM)
def state():
    with open("/proc/1/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
before = state()
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGPIPE, signal.SIGSTOP, signal.SIGKILL):
    try:
        os.kill(1, sig)
    except OSError as e:
        print("kill(1, %s): %s" % (sig.name, ename(e.errno)))
time.sleep(0.3)
after = state()
check(after in ("S", "R", "D"), "PID 1 is in state %r after the signals, want running or sleeping" % after)
check(os.getppid() == 1, "parent is %d, want 1" % os.getppid())
print("PID 1 state before %s, after %s" % (before, after))
finish()
