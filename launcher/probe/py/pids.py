from _composed import GVISOR, PIDS, check, ename, errno, fail, finish, note, os  # defined by what probe.go puts before this file; the line is dropped
import signal, threading
def read(path):
    with open(path) as f:
        return f.read().strip()
if GVISOR:
    # gVisor counts the program's tasks in its own kernel, by RLIMIT_NPROC (per
    # sandbox there); the host's pids cgroup only bounds gVisor's own tasks.
    import resource
    lim = resource.getrlimit(resource.RLIMIT_NPROC)
    check(lim == (PIDS, PIDS), "RLIMIT_NPROC = %r, want (%d, %d)" % (lim, PIDS, PIDS))
    note("gVisor: the limit is RLIMIT_NPROC = %r in gVisor's kernel" % (lim,))
else:
    for p in ("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max"):
        if os.path.exists(p):
            v = read(p)
            # "max": the limit sits on a parent cgroup the sandbox cannot see (Kubernetes
            # puts the kubelet's podPidsLimit on the pod's); the spawning below must still stop.
            check(v in (str(PIDS), "max"), "%s = %s, want %d" % (p, v, PIDS))
            if v == "max":
                print("%s = max: the limit is a parent cgroup's; measured below" % p)
            break
    else:
        fail("no pids.max visible")

# The program shares the limit with the bootstrap; the spawning stops at a ceiling
# well above Pids, so a missing limit fails quickly instead of exhausting the host.
CEILING = 4 * PIDS + 64


def spawn(start, error):
    """Calls start() until it raises error, or CEILING times: (what it made, the error)."""
    made = []
    try:
        while len(made) < CEILING:
            made.append(start())
    except error as e:
        return made, e
    return made, None


def thread():
    t = threading.Thread(target=ev.wait)
    t.start()
    return t


threading.stack_size(256 << 10)
ev = threading.Event()
threads, err = spawn(thread, RuntimeError)
if err is not None:
    print("threads stopped at %d: %s" % (len(threads), err))
ev.set()
for t in threads:
    t.join()
check(len(threads) < PIDS, "started %d threads, want fewer than Pids=%d" % (len(threads), PIDS))

# Processes: spawned without copying the interpreter (posix_spawn uses a vfork-like
# clone), so that the memory limit is not what stops them.
kids, err = spawn(lambda: os.posix_spawn("/bin/sleep", ["sleep", "600"], {}), OSError)
if err is not None:
    print("processes stopped at %d: %s" % (len(kids), ename(err.errno)))
for k in kids:
    os.kill(k, signal.SIGKILL)
for k in kids:
    os.waitpid(k, 0)
check(len(kids) < PIDS, "spawned %d processes, want fewer than Pids=%d" % (len(kids), PIDS))
check(err is not None and err.errno == errno.EAGAIN, "spawning stopped with %r, want EAGAIN" % (err,))
# The limit is a ceiling, not a trap: the program goes on once its children are gone.
t = threading.Thread(target=lambda: None)
t.start()
t.join()
finish()
