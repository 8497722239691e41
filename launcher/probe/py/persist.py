from _composed import TOKEN, check, os  # defined by what probe.go puts before this file; the line is dropped
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
PATHS = ["/tmp/" + TOKEN, "/tmp/.config/" + TOKEN, "/tmp/.cache/" + TOKEN, "/dev/shm/" + TOKEN]
SHM_KEY = 0x4d435058  # "MCPX"
# What a fresh sandbox's /tmp holds: the bootstrap's own directories, nothing else.
FRESH_TMP = {".config", "outputs"}


def fresh():
    left = sorted(set(os.listdir("/tmp")) - FRESH_TMP)
    check(not left, "/tmp holds more than the bootstrap's %s at start: %s" % (sorted(FRESH_TMP), left[:10]))
    left = os.listdir("/dev/shm")
    check(not left, "/dev/shm is not empty at start: %s" % left[:10])

