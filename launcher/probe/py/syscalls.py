from _composed import GVISOR, ename, errno, fail, finish, note, os  # defined by what probe.go puts before this file; the line is dropped
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L, P, S = ctypes.c_long, ctypes.c_void_p, ctypes.c_char_p
NULL = P(0)
ARCH = platform.machine()
# name: (x86_64, aarch64)
NR = {
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "userfaultfd": (323, 282), "unshare": (272, 97), "clone": (56, 220), "clone3": (435, 435),
    "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "ptrace": (101, 117),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "open_by_handle_at": (304, 265),
    "syslog": (103, 116), "personality": (135, 92), "quotactl": (179, 60),
    "fanotify_init": (300, 262), "acct": (163, 89), "reboot": (169, 142),
    "swapon": (167, 224), "settimeofday": (164, 170), "vhangup": (153, 58),
    "iopl": (172, None), "ioperm": (173, None),
}
col = {"x86_64": 0, "aarch64": 1}.get(ARCH)
if col is None:
    fail("no syscall table for %s" % ARCH)
    finish()

SIGCHLD = 17
CLONE = {"CLONE_NEWUSER": 0x10000000, "CLONE_NEWNS": 0x00020000, "CLONE_NEWNET": 0x40000000,
         "CLONE_NEWPID": 0x20000000, "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUTS": 0x04000000,
         "CLONE_NEWCGROUP": 0x02000000}
uring_params = ctypes.create_string_buffer(120)
calls = [
    ("io_uring_setup", "io_uring_setup(1, params)", (L(1), uring_params)),
    ("io_uring_enter", "io_uring_enter(-1, ...)", (L(-1), L(0), L(0), L(0), NULL, L(0))),
    ("io_uring_register", "io_uring_register(-1, ...)", (L(-1), L(0), NULL, L(0))),
    # UFFD_USER_MODE_ONLY: allowed unprivileged by the kernel itself
    ("userfaultfd", "userfaultfd(O_CLOEXEC|O_NONBLOCK|UFFD_USER_MODE_ONLY)", (L(os.O_CLOEXEC | os.O_NONBLOCK | 1),)),
]
calls += [("unshare", "unshare(%s)" % n, (L(f),)) for n, f in CLONE.items()]
calls += [
    ("clone", "clone(CLONE_NEWUSER|SIGCHLD)", (L(CLONE["CLONE_NEWUSER"] | SIGCHLD), L(0), L(0), L(0), L(0))),
    ("clone3", "clone3(NULL, 0)", (NULL, L(0))),
    ("setns", "setns(-1, 0)", (L(-1), L(0))),
    ("mount", "mount(none, /tmp, tmpfs)", (S(b"none"), S(b"/tmp"), S(b"tmpfs"), L(0), NULL)),
    ("umount2", "umount2(/tmp)", (S(b"/tmp"), L(0))),
    ("pivot_root", "pivot_root(., .)", (S(b"."), S(b"."))),
    ("open_tree", "open_tree(AT_FDCWD, /tmp, OPEN_TREE_CLONE)", (L(-100), S(b"/tmp"), L(1))),
    ("move_mount", "move_mount(-1, '', -1, '', 0)", (L(-1), S(b""), L(-1), S(b""), L(0))),
    ("fsopen", "fsopen(tmpfs)", (S(b"tmpfs"), L(0))),
    ("keyctl", "keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING)", (L(0), L(-3), L(0))),
    ("add_key", "add_key(user, ..., KEY_SPEC_PROCESS_KEYRING)", (S(b"user"), S(b"mcpexecprobe"), S(b"x"), L(1), L(-2))),
    ("request_key", "request_key(user, ...)", (S(b"user"), S(b"mcpexecprobe"), NULL, L(0))),
    ("bpf", "bpf(BPF_MAP_CREATE, NULL, 0)", (L(0), NULL, L(0))),
    ("perf_event_open", "perf_event_open(NULL, ...)", (NULL, L(0), L(-1), L(-1), L(0))),
    # moby's profile allows ptrace; PID 1 (the bootstrap) refuses it by being non-dumpable
    ("ptrace", "ptrace(PTRACE_ATTACH, 1)", (L(16), L(1), L(0), L(0))),
    # an unknown flag: past the capability check the kernel answers EINVAL, and an
    # empty segment list with valid flags would unload a loaded kexec kernel
    ("kexec_load", "kexec_load(0, 0, NULL, 0x80)", (L(0), L(0), NULL, L(0x80))),
    ("kexec_file_load", "kexec_file_load(-1, -1, 0, NULL, 0)", (L(-1), L(-1), L(0), NULL, L(0))),
    ("init_module", "init_module(NULL, 0, '')", (NULL, L(0), S(b""))),
    ("finit_module", "finit_module(-1, '', 0)", (L(-1), S(b""), L(0))),
    ("delete_module", "delete_module(mcpexecprobe, O_NONBLOCK)", (S(b"mcpexecprobe"), L(os.O_NONBLOCK))),
    ("open_by_handle_at", "open_by_handle_at(-1, NULL, 0)", (L(-1), NULL, L(0))),
    # SYSLOG_ACTION_SIZE_BUFFER: allowed unprivileged by the kernel when dmesg_restrict=0
    ("syslog", "syslog(SYSLOG_ACTION_SIZE_BUFFER)", (L(10), NULL, L(0))),
    # ADDR_NO_RANDOMIZE: would turn address randomization off for what the program runs
    ("personality", "personality(ADDR_NO_RANDOMIZE)", (L(0x0040000),)),
    # Q_SYNC needs no privilege in the kernel
    ("quotactl", "quotactl(QCMD(Q_SYNC, USRQUOTA), NULL)", (L(0x800001 << 8), NULL, L(0), NULL)),
    ("fanotify_init", "fanotify_init(0, 0)", (L(0), L(0))),
    ("acct", "acct(NULL)", (NULL,)),
    ("reboot", "reboot(bad magic)", (L(0), L(0), L(0), NULL)),
    ("swapon", "swapon(/tmp/x)", (S(b"/tmp/x"), L(0))),
    ("settimeofday", "settimeofday(NULL, NULL)", (NULL, NULL)),
    ("vhangup", "vhangup()", ()),
    ("iopl", "iopl(3)", (L(3),)),
    ("ioperm", "ioperm(0x80, 1, 1)", (L(0x80), L(1), L(1))),
]
# What the profile answers; anything else means the call reached the kernel.
EXPECT = {"clone3": errno.ENOSYS}


def attempt(name, nr, args):
    """Makes the call in a child of its own, so that a call that goes through (a new
    namespace, a personality, I/O port access) changes nothing for the calls after it.
    Returns (result, errno), or (None, signal) when the child was killed."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            ctypes.set_errno(0)
            r = libc.syscall(L(nr), *args)
            e = ctypes.get_errno()
            if name == "clone" and r == 0:
                os._exit(0)  # the child of a clone that went through
            if name == "clone" and r > 0:
                os.waitpid(r, 0)
            if name == "ptrace" and r == 0:
                # Attached to PID 1: let it go again, or it would stay stopped.
                try:
                    os.waitpid(1, 0x40000000)  # __WALL
                except OSError:
                    pass
                libc.syscall(L(nr), L(17), L(1), L(0), L(0))  # PTRACE_DETACH
            os.write(wfd, b"%d %d" % (r, e))
        finally:
            os._exit(0)
    os.close(wfd)
    out = b""
    while True:
        b = os.read(rfd, 64)
        if not b:
            break
        out += b
    os.close(rfd)
    _, st = os.waitpid(pid, 0)
    if not out:
        return None, os.WTERMSIG(st) if os.WIFSIGNALED(st) else -1
    r, e = out.split()
    return int(r), int(e)


seen = []
for name, what, args in calls:
    nr = NR[name][col]
    if nr is None:
        continue
    if GVISOR and name == "clone3":
        note("clone3: allowed by gVisor's profile (runsc answers denials with EPERM, which breaks glibc's fallback to clone); gVisor's kernel handles it")
        continue
    want = EXPECT.get(name, errno.EPERM)
    r, e = attempt(name, nr, args)
    if r is None:
        fail("%s: the process was killed by signal %d, want %s" % (what, e, ename(want)))
        got = "signal %d" % e
    elif r >= 0:
        fail("%s returned %d, want %s" % (what, r, ename(want)))
        got = str(r)
    else:
        if e != want:
            fail("%s failed with %s, want %s" % (what, ename(e), ename(want)))
        got = ename(e)
    seen.append("%s=%s" % (name if name != "unshare" else what, got))
print("errno:", " ".join(seen))
finish()
