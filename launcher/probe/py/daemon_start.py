from _composed import TOKEN, check, fail, finish, os, print_sandbox_id  # defined by what probe.go puts before this file; the line is dropped
import sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execv(sys.executable, [sys.executable, "-c", "import time\nwhile True: time.sleep(60)", TOKEN])
    os._exit(0)
os.close(w)
pid = int(os.read(r, 32))
os.close(r)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if TOKEN.encode() in f.read():
                break
    except OSError:
        pass
    time.sleep(0.05)
else:
    fail("the daemon %d did not come up" % pid)
check(os.getsid(pid) != os.getsid(0), "the daemon did not leave the session")
print("DAEMON %d" % pid)
# The container's id, for the runner to confirm that the container is removed.
print_sandbox_id()
finish()
