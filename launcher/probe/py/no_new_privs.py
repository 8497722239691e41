from _composed import check, finish, status  # defined by what probe.go puts before this file; the line is dropped
import ctypes
for pid in ("self", "1"):
    v = status(pid).get("NoNewPrivs")
    check(v == "1", "/proc/%s/status NoNewPrivs = %s, want 1" % (pid, v))
libc = ctypes.CDLL(None, use_errno=True)
r = libc.prctl(39, 0, 0, 0, 0)  # PR_GET_NO_NEW_PRIVS
check(r == 1, "prctl(PR_GET_NO_NEW_PRIVS) = %d, want 1" % r)
finish()
