from _composed import MEMORY, _FAILS, fail, finish, hog  # defined by what probe.go puts before this file; the line is dropped
if _FAILS:
    finish()
print("ALLOCATING", flush=True)
try:
    got = hog(2 * MEMORY)
    fail("allocated and touched %d bytes, twice the %d limit, without being killed" % (got, MEMORY))
except MemoryError:
    fail("MemoryError instead of the OOM killer")
finish()
