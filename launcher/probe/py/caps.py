from _composed import check, finish, status  # defined by what probe.go puts before this file; the line is dropped
for pid in ("self", "1"):
    st = status(pid)
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        v = st.get(key)
        check(v is not None and int(v, 16) == 0, "/proc/%s/status %s = %s, want 0" % (pid, key, v))
finish()
