import errno, os, sys

# What the fragments that follow use from here.
__all__ = ["errno", "os", "sys", "fail", "check", "ename", "denied", "status", "mountinfo", "mount_of", "finish",
           "KERNEL_GVISOR", "note", "status_and_prctl", "walk"]


def _gvisor():
    # gVisor's kernel names itself in its release (4.19.0-gvisor); older builds report
    # the fixed 4.4.0 with a build date of 2016-01-10.
    with open("/proc/version") as f:
        v = f.read()
    return "gvisor" in v or v.startswith("Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016")


KERNEL_GVISOR = _gvisor()


def note(msg):
    """A difference of the kernel the probe runs on, said in its output."""
    print("note: " + " ".join(str(msg).split()))
_FAILS = []


def fail(msg):
    _FAILS.append(" ".join(str(msg).split()))


def check(cond, msg):
    if not cond:
        fail(msg)
    return bool(cond)


def ename(n):
    if isinstance(n, int):
        return errno.errorcode.get(n, str(n))
    return repr(n)


def denied(what, fn, *want):
    """fn() must raise OSError with an errno in want. Returns the errno seen."""
    try:
        r = fn()
    except OSError as e:
        if e.errno in want:
            print("%s: denied (%s)" % (what, ename(e.errno)))
        else:
            fail("%s: failed with %s (%s), want %s" % (what, ename(e.errno), e, "/".join(map(ename, want))))
        return e.errno
    fail("%s: succeeded (%r), want %s" % (what, r, "/".join(map(ename, want))))
    return None


def status(pid="self"):
    out = {}
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def status_and_prctl(field, option, name, want, meaning=""):
    """The status field of this process and of pid 1, and prctl(option) here, must be want."""
    import ctypes
    for pid in ("self", "1"):
        v = status(pid).get(field)
        check(v == str(want), "/proc/%s/status %s = %s, want %d%s" % (pid, field, v, want, meaning and " (%s)" % meaning))
    r = ctypes.CDLL(None, use_errno=True).prctl(option, 0, 0, 0, 0)
    check(r == want, "prctl(%s) = %d, want %d" % (name, r, want))


def walk(skip=()):
    """Every directory from / down, depth first, with its entries (None when it cannot
    be listed); not /proc, /sys, those in skip, nor what is below them."""
    skip = ("/proc", "/sys") + tuple(skip)
    stack = ["/"]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            entries = None
        yield d, entries
        for e in entries or ():
            try:
                if e.is_dir(follow_symlinks=False) and e.path not in skip:
                    stack.append(e.path)
            except OSError:
                pass


def mountinfo():
    """[(mount point, per-mount options, fstype, super options)]"""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            l, r = left.split(), right.split()
            out.append((l[4], l[5].split(","), r[0], r[2].split(",") if len(r) > 2 else []))
    return out


def mount_of(path):
    best = None
    for m in mountinfo():
        p = m[0]
        if path == p or path.startswith(p.rstrip("/") + "/") or p == "/":
            if best is None or len(p) >= len(best[0]):
                best = m
    return best


def _hook(t, v, tb):
    import traceback
    traceback.print_exception(t, v, tb)
    print("PROBE FAIL: unexpected %s: %s" % (t.__name__, " ".join(str(v).split())), flush=True)


sys.excepthook = _hook


def finish():
    want = globals().get("GVISOR")
    check(want == KERNEL_GVISOR, "the kernel is %s, but the probe was told %s" % (
        "gVisor's" if KERNEL_GVISOR else "Linux's", "gVisor" if want else "not gVisor"))
    if _FAILS:
        print("PROBE FAIL: " + "; ".join(_FAILS), flush=True)
        sys.exit(1)
    print("PROBE OK", flush=True)
    sys.exit(0)


