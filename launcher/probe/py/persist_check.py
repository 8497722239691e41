from _composed import PATHS, SHM_KEY, check, ctypes, ename, errno, finish, fresh, libc, os  # defined by what probe.go puts before this file; the line is dropped
for p in PATHS:
    check(not os.path.exists(p), "%s from the previous exec is still there" % p)
fresh()
ctypes.set_errno(0)
shmid = libc.shmget(SHM_KEY, 0, 0)
check(shmid < 0 and ctypes.get_errno() == errno.ENOENT,
      "the previous exec's shared memory segment: shmget = %d (%s), want ENOENT" % (shmid, ename(ctypes.get_errno())))
finish()
