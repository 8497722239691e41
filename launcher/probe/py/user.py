from _composed import SANDBOX_UID, check, denied, errno, finish, os, status  # defined by what probe.go puts before this file; the line is dropped
want = (SANDBOX_UID,) * 3
check(os.getresuid() == want, "getresuid %r, want %r" % (os.getresuid(), want))
check(os.getresgid() == want, "getresgid %r, want %r" % (os.getresgid(), want))
groups = os.getgroups()
check(0 not in groups, "supplementary groups %r include 0" % groups)
check(set(groups) <= {SANDBOX_UID}, "supplementary groups %r, want at most [%d]" % (groups, SANDBOX_UID))
for pid in ("self", "1"):
    st = status(pid)
    for key in ("Uid", "Gid"):
        ids = [int(x) for x in st[key].split()]
        check(ids == [SANDBOX_UID] * 4, "/proc/%s/status %s %r, want all %d" % (pid, key, ids, SANDBOX_UID))
    check("0" not in st.get("Groups", "").split(), "/proc/%s/status Groups %r include 0" % (pid, st.get("Groups")))
denied("setuid(0)", lambda: os.setuid(0), errno.EPERM)
denied("setgid(0)", lambda: os.setgid(0), errno.EPERM)
denied("setgroups([0])", lambda: os.setgroups([0]), errno.EPERM)
print("uid/gid", os.getuid(), os.getgid(), "groups", groups)
finish()
