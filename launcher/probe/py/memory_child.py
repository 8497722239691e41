from _composed import MEMORY, OOM, _FAILS, check, finish, hog, oom_kills, os  # defined by what probe.go puts before this file; the line is dropped
import signal
if _FAILS:
    finish()
before = oom_kills()
pid = os.fork()
if pid == 0:
    try:
        hog(2 * MEMORY)
    finally:
        os._exit(3)
_, st = os.waitpid(pid, 0)
check(os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL,
      "the allocating child ended with status %#x, want killed by SIGKILL" % st)
after = oom_kills()
check(OOM is None or after > before, "the cgroup's oom_kill counter went from %d to %d, want it to grow" % (before, after))
print("child killed; oom_kill %d -> %d" % (before, after))
finish()
