from _composed import GVISOR, PROCESS, check, denied, ename, errno, finish, note, os  # defined by what probe.go puts before this file; the line is dropped
import ctypes, signal, time
libc = ctypes.CDLL(None, use_errno=True)
denied("open /proc/1/fd/1 for write", lambda: open("/proc/1/fd/1", "wb"), errno.EACCES, errno.EPERM)
denied("open /proc/1/mem", lambda: open("/proc/1/mem", "rb"), errno.EACCES, errno.EPERM)
denied("read /proc/1/environ", lambda: open("/proc/1/environ", "rb").read(), errno.EACCES, errno.EPERM)
if GVISOR:
    # gVisor lists a non-dumpable process's descriptor numbers to the same user; each
    # descriptor must still refuse to be opened or read as a link. gVisor looks the
    # number up in PID 1's table before it checks access (its /proc/<pid>/fd lookup
    # answers ENOENT for a descriptor that is not open), so a descriptor PID 1 closed
    # after the listing answers ENOENT: in a session PID 1 opens and closes
    # /proc/<holder>/stat on each turn of its loop. Nothing is reached either way, so
    # ENOENT is accepted here, under gVisor only; EACCES/EPERM must still come from the
    # descriptors that stay open (fd 1, the server's stream, is checked above without
    # ENOENT).
    fds = os.listdir("/proc/1/fd")
    note("gVisor: /proc/1/fd lists %s to the program (numbers only)" % sorted(fds, key=int))
    check(fds, "/proc/1/fd lists nothing")
    refused = 0
    for fd in fds:
        for what, fn in (("open", lambda: open("/proc/1/fd/" + fd, "rb")),
                         ("readlink", lambda: os.readlink("/proc/1/fd/" + fd))):
            e = denied("%s /proc/1/fd/%s" % (what, fd), fn, errno.EACCES, errno.EPERM, errno.ENOENT)
            if e == errno.ENOENT:
                note("gVisor: /proc/1/fd/%s was closed after the listing (ENOENT)" % fd)
            elif e is not None:
                refused += 1
    check(refused, "no descriptor of /proc/1/fd was refused for access (EACCES/EPERM): all answered ENOENT")
else:
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
sigs = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
        signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE, signal.SIGSTOP, signal.SIGKILL]
if GVISOR:
    # gVisor does not shield a PID namespace's init from its own processes' signals: the
    # bootstrap ignores every signal it can (the ones above), but SIGSTOP and SIGKILL
    # cannot be ignored. Sent, they stop or end the program's own run, nothing more.
    note("gVisor: SIGSTOP and SIGKILL to PID 1 not sent: gVisor delivers them to a namespace's init, which would end this run")
    sigs = sigs[:-2]
if PROCESS:
    # Standalone mode: PID 1 is the server, which kills the runs under way on SIGTERM or
    # SIGINT (a program may have sent it; docs/standalone.md, "Signals"): sent, they end
    # this run before its verdict. TestStandaloneServerProtected sends them.
    note("process backend: SIGTERM and SIGINT to PID 1 (the server) not sent: the server kills the run under way")
    sigs = [s for s in sigs if s not in (signal.SIGTERM, signal.SIGINT)]
for sig in sigs:
    try:
        os.kill(1, sig)
    except OSError as e:
        print("kill(1, %s): %s" % (sig.name, ename(e.errno)))
time.sleep(0.3)
after = state()
check(after in ("S", "R", "D"), "PID 1 is in state %r after the signals, want running or sleeping" % after)
if PROCESS:
    check(os.getppid() != 1, "parent is PID 1 (the server), want the run's bootstrap")
else:
    check(os.getppid() == 1, "parent is %d, want 1" % os.getppid())
print("PID 1 state before %s, after %s" % (before, after))
finish()
