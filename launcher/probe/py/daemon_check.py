from _composed import TOKEN, check, finish, os  # defined by what probe.go puts before this file; the line is dropped
pids = sorted(int(n) for n in os.listdir("/proc") if n.isdigit())
check(pids == sorted({1, os.getpid()}), "processes other than the bootstrap and the program: %s" % [p for p in pids if p not in (1, os.getpid())])
for p in pids:
    try:
        with open("/proc/%d/cmdline" % p, "rb") as f:
            check(TOKEN.encode() not in f.read(), "the previous exec's daemon runs as %d" % p)
    except FileNotFoundError:
        pass
finish()
